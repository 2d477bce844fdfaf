"""Best-fit packing keeps examples whole and, with reset position_ids, gives each example the loss it has alone."""

from __future__ import annotations

import random

import pytest
import torch
from finetune.data import IGNORE_INDEX, Tokenized, best_fit_bins, pack
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling


def test_best_fit_fills_bins_tightly_and_keeps_every_item_once():
    rng = random.Random(0)
    lengths = [rng.randint(5, 60) for _ in range(300)]
    bins = best_fit_bins(lengths, capacity=128)
    assert sorted(i for members in bins for i in members) == list(range(300))
    assert all(sum(lengths[i] for i in members) <= 128 for members in bins)
    assert sum(lengths) / (128 * len(bins)) > 0.98  # nearly every position holds a real token


def test_best_fit_puts_an_item_where_it_leaves_the_least_room():
    assert best_fit_bins([6, 5, 4, 2], capacity=8) == [[0, 3], [1], [2]]


def test_pack_resets_positions_and_never_supervises_an_examples_first_token():
    examples = [Tokenized([1, 7, 8], [1, 7, 8]), Tokenized([1, 9], [IGNORE_INDEX, 9]), Tokenized([1, 5, 6, 4], [1] * 4)]
    blocks = pack(examples, block_size=6)
    by_length = sorted(blocks, key=lambda block: len(block["input_ids"]))
    assert [block["seq_lengths"] for block in by_length] == [[3], [4, 2]]
    assert by_length[1]["labels"] == [IGNORE_INDEX, 1, 1, 1, IGNORE_INDEX, 9]
    batch = DataCollatorForLanguageModeling(pad_token_id=2, padding_free=True)(by_length)
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 2, 3, 0, 1]]


def test_trls_padding_free_collator_restarts_positions_and_masks_each_examples_first_label():
    """Labels as the packed blocks carry them, first tokens included: the collator itself masks those."""
    rows = [
        {"input_ids": [1, 5, 1, 6], "labels": [1, 5, 1, 6], "seq_lengths": [2, 2]},
        {"input_ids": [1, 7], "labels": [1, 7], "seq_lengths": [2]},
    ]
    batch = DataCollatorForLanguageModeling(pad_token_id=2, padding_free=True)(rows)
    assert "attention_mask" not in batch
    assert batch["input_ids"].tolist() == [[1, 5, 1, 6, 1, 7]]
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 0, 1]]
    assert batch["labels"].tolist() == [[-100, 5, -100, 6, -100, 7]]


def per_token_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Loss of each label position (NaN-free: ignored positions give 0), as the causal-LM loss shifts them."""
    shifted = labels[:, 1:]
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), shifted, ignore_index=IGNORE_INDEX, reduction="none"
    )
    return losses


@pytest.mark.parametrize("attention", ["sdpa", "eager", "qlora_packed_sdpa"])
def test_packed_batch_gives_each_example_its_unpacked_loss(tiny_llama, attention):
    from finetune.attention import register
    from transformers import AutoModelForCausalLM

    register()  # the per-example attention train.py uses with packing
    model = AutoModelForCausalLM.from_pretrained(tiny_llama, attn_implementation=attention).eval()
    model.config.use_cache = False  # as in training: with a KV cache transformers ignores the position resets
    rng = random.Random(3)
    examples = []
    for length in (9, 23, 14, 30, 5, 17):
        ids = [1] + [rng.randint(3, 300) for _ in range(length - 1)]
        labels = [IGNORE_INDEX] * (length // 2) + ids[length // 2 :]  # a masked prompt, a supervised answer
        examples.append(Tokenized(ids, labels))
    collate = DataCollatorForLanguageModeling(pad_token_id=2)
    flatten = DataCollatorForLanguageModeling(pad_token_id=2, padding_free=True)  # as the trainer packs
    with torch.no_grad():
        alone = []
        for example in examples:
            batch = collate([{"input_ids": example.input_ids, "labels": example.labels}])
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            alone.append(per_token_losses(logits, batch["labels"])[0].sum().item())
        blocks = pack(examples, block_size=40)
        assert len(blocks) < len(examples)
        batch = flatten(blocks)
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
        packed_losses = per_token_losses(logits, batch["labels"])
    # Map each example to its place in the flattened batch to sum its own losses there.
    recovered, start = {}, 0
    for block in blocks:
        for example_index in _members(block, examples):
            length = len(examples[example_index].input_ids)
            recovered[example_index] = packed_losses[0, start : start + length - 1].sum().item()
            start += length
    assert sorted(recovered) == list(range(len(examples)))
    for index, loss in enumerate(alone):
        assert recovered[index] == pytest.approx(loss, rel=1e-4, abs=1e-4), index
    # Without reset positions (plain concatenation) the later examples' losses change.
    with torch.no_grad():
        crossing = model(input_ids=batch["input_ids"]).logits
    assert not torch.allclose(per_token_losses(crossing, batch["labels"]), packed_losses, atol=1e-3)


def _members(block: dict, examples: list[Tokenized]) -> list[int]:
    """The examples of a block, in order, found by matching their ids at each example start."""
    found, start, ids = [], 0, block["input_ids"]
    for length in block["seq_lengths"]:
        index = next(
            i
            for i, example in enumerate(examples)
            if i not in found and ids[start : start + length] == example.input_ids
        )
        found.append(index)
        start += length
    return found


def test_auto_pack_length_is_the_token_weighted_mean_length_rounded_up():
    from finetune.data import auto_pack_length

    # sum l^2 / sum l = (100^2 * 3 + 1000^2) / 1300 = 792.3 -> 832
    assert auto_pack_length([100, 100, 100, 1000], max_seq_length=2048) == 832
    assert auto_pack_length([100, 100, 100, 1000], max_seq_length=512) == 512
    assert auto_pack_length([10, 12], max_seq_length=512) == 64


def test_pack_length_flag_is_auto_or_bounded_by_max_seq_length(capsys):
    from finetune.args import parse_args

    local = ["--model_id", "m", "--train_data", "d", "--output_dir", "o", "--max_seq_length", "256"]
    assert parse_args(local, env={}).pack_tokens is None
    assert parse_args([*local, "--pack_length", "128"], env={}).pack_tokens == 128
    with pytest.raises(SystemExit):
        parse_args([*local, "--pack_length", "512"], env={})
    assert "--pack_length must be `auto` or an integer from 16 to --max_seq_length (256)" in capsys.readouterr().err


def test_segments_split_rows_at_position_resets():
    from finetune.attention import segments

    assert segments(torch.tensor([[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 4, 5]])) == [[(0, 3), (3, 5), (5, 6)], [(0, 6)]]
