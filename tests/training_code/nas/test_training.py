"""Training strategies: each runs, updates weights, and the distillation loss behaves."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from pruning.data import batches, load_splits
from pruning.masks import SubnetworkMasks
from pruning.training import TrainSettings, distillation_loss, subnetworks_for_step, training_step


def test_distillation_loss_is_zero_for_equal_logits_and_scales_with_temperature():
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.3]])
    assert distillation_loss(logits, logits, 2.0).item() == pytest.approx(0.0, abs=1e-7)
    student = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    assert distillation_loss(student, logits, 1.0).item() > 0


@pytest.mark.parametrize("strategy", ["standard", "sandwich", "kd"])
def test_one_step_of_each_strategy_moves_the_weights(classifier, sample_data_dir, strategy):
    model = copy.deepcopy(classifier[0]).train()
    tokenizer = classifier[1]
    settings = TrainSettings(strategy=strategy, batch_size=2, max_length=32, num_random_subnets=1)
    masks = SubnetworkMasks(model)
    subnets = subnetworks_for_step(settings, masks, random.Random(0))
    assert len(subnets) == (0 if strategy == "standard" else 2)
    batch = next(batches(load_splits("jsonl", sample_data_dir)["train"][:2], tokenizer, 2, 32))
    before = model.bert.encoder.layer[0].intermediate.dense.weight.detach().clone()
    loss = training_step(model, masks, batch, settings, random.Random(0))
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    masks.remove()
    assert loss > 0 and torch.isfinite(torch.tensor(loss))
    assert not torch.equal(before, model.bert.encoder.layer[0].intermediate.dense.weight)
    # The smallest sub-network (no layers) never reaches layer 5's FFN, random ones may: grads stay finite.
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_unknown_strategy_is_rejected():
    with pytest.raises(ValueError, match="unknown strategy"):
        TrainSettings(strategy="magic")


def test_sandwich_lower_bound_mixes_tokens(classifier):
    from pruning.masks import model_dims
    from pruning.training import training_smallest

    dims = model_dims(classifier[0].config)
    assert training_smallest("uniform", dims, 0).num_layers == 0  # the space's own minimum
    for space in ("uniform", "per_layer"):
        smallest = training_smallest(space, dims, 1)
        assert smallest.num_layers == 1 and smallest.heads[0] >= 1 and smallest.units[0] == 0
    settings = TrainSettings(strategy="kd", search_space="per_layer", num_random_subnets=20, min_subnet_layers=2)
    masks = SubnetworkMasks(classifier[0])
    try:
        assert all(c.num_layers >= 2 for c in subnetworks_for_step(settings, masks, random.Random(1)))
    finally:
        masks.remove()


def test_teacher_epochs_come_first_and_must_leave_super_network_epochs():
    from pruning.training import training_phases

    teacher, supernet = training_phases(TrainSettings(strategy="kd", epochs=5, teacher_epochs=2))
    assert (teacher.first, teacher.last, teacher.settings.strategy, teacher.rewire_after) == (1, 2, "standard", True)
    assert (supernet.first, supernet.last, supernet.settings.strategy, supernet.rewire_after) == (3, 5, "kd", False)
    assert not training_phases(TrainSettings(strategy="kd", epochs=5, teacher_epochs=1, rewire=False))[0].rewire_after
    assert len(training_phases(TrainSettings(strategy="sandwich", epochs=2, teacher_epochs=0))) == 1
    assert len(training_phases(TrainSettings(strategy="standard", epochs=2, teacher_epochs=7))) == 1
    with pytest.raises(ValueError, match="teacher_epochs 3 must be in 0..epochs-1"):
        TrainSettings(strategy="kd", epochs=3, teacher_epochs=3)


class _Interrupted(Exception):
    pass


def test_resumed_training_matches_an_uninterrupted_run_across_the_rewiring(classifier, sample_data_dir):
    """Checkpoints after the teacher epoch (rewired) and inside the kd phase resume bit for bit."""
    from pruning.training import train_supernetwork

    tokenizer = classifier[1]
    splits = load_splits("jsonl", sample_data_dir)
    train, validation = splits["train"][:4], splits["validation"][:2]
    settings = TrainSettings(
        strategy="kd", epochs=3, teacher_epochs=1, batch_size=2, max_length=32, max_steps=1, learning_rate=1e-3
    )
    uninterrupted = copy.deepcopy(classifier[0])
    history = train_supernetwork(uninterrupted, tokenizer, train, validation, settings)["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]

    saved = {}

    def stop_after(epoch_to_stop):
        def on_epoch_end(epoch, loss, error, optimizer, scheduler):
            if epoch == epoch_to_stop:
                saved.update(
                    weights=copy.deepcopy(model.state_dict()),
                    state={"optimizer": copy.deepcopy(optimizer.state_dict()), "scheduler": scheduler.state_dict()},
                )
                raise _Interrupted

        return on_epoch_end

    model, start, state = copy.deepcopy(classifier[0]), 1, None
    for stop in (1, 2):
        with pytest.raises(_Interrupted):
            train_supernetwork(model, tokenizer, train, validation, settings, stop_after(stop), start, state)
        model = copy.deepcopy(classifier[0])
        model.load_state_dict(saved["weights"])
        start, state = stop + 1, saved["state"]
    train_supernetwork(model, tokenizer, train, validation, settings, None, start, state)
    for (name, expected), got in zip(uninterrupted.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(expected, got), name
    # The rewiring really happened: layer 0's query rows are no longer the pre-trained order.
    assert not torch.equal(
        model.bert.encoder.layer[0].attention.self.query.weight,
        classifier[0].bert.encoder.layer[0].attention.self.query.weight,
    )


def test_cli_rejects_teacher_epochs_that_leave_no_super_network_epoch():
    import train_supernetwork

    with pytest.raises(SystemExit) as raised:
        train_supernetwork.main(["--strategy", "kd", "--epochs", "2", "--teacher-epochs", "2"])
    assert str(raised.value) == (
        "train_supernetwork.py: teacher_epochs 2 must be in 0..epochs-1 (1): the last epochs train the sub-networks"
    )


def test_the_fresh_classifier_head_is_drawn_from_the_seed(minilm_path):
    import train_supernetwork

    torch.manual_seed(123)  # whatever ran before must not matter
    first, _ = train_supernetwork.initial_model(minilm_path, seed=5)
    torch.manual_seed(456)
    again, _ = train_supernetwork.initial_model(minilm_path, seed=5)
    other, _ = train_supernetwork.initial_model(minilm_path, seed=6)
    torch.testing.assert_close(first.classifier.weight, again.classifier.weight, rtol=0, atol=0)
    assert not torch.equal(first.classifier.weight, other.classifier.weight)


class _Started(Exception):
    """Raised by the stand-in trainer: main() got as far as training, from this epoch."""


def _stale_checkpoint(minilm_path, folder, epoch: int = 2):
    """A complete checkpoint as a finished run leaves it: <folder>/supernet with weights, metadata, state."""
    from nas_test_helpers import supernet_folder

    supernet = supernet_folder(minilm_path, folder / "supernet", {"search_space": "uniform", "epochs_done": epoch})
    torch.save({"epoch": epoch, "optimizer": {}, "scheduler": {}}, supernet / "trainer_state.pt")
    return folder


def _start_epoch(monkeypatch, minilm_path, sample_data_dir, tmp_path) -> int:
    import train_supernetwork

    def trainer(*_args, start_epoch, **_kwargs):
        raise _Started(start_epoch)

    monkeypatch.setattr(train_supernetwork, "train_supernetwork", trainer)
    argv = [
        "--model-name-or-path",
        str(minilm_path),
        "--data-dir",
        str(sample_data_dir),
        "--max-rows",
        "8",
        "--epochs",
        "5",
        "--teacher-epochs",
        "1",
        "--output-dir",
        str(tmp_path / "out"),
    ]
    with pytest.raises(_Started) as started:
        train_supernetwork.main(argv)
    return started.value.args[0]


def test_outside_a_sagemaker_job_a_stale_checkpoint_folder_is_not_resumed(
    monkeypatch, minilm_path, sample_data_dir, tmp_path, capsys
):
    """A dev box with /opt/ml/checkpoints left by another run: without SM_MODEL_DIR nothing is resumed."""
    import train_supernetwork
    from pruning import settings as nas_settings

    stale = _stale_checkpoint(minilm_path, tmp_path / "opt-ml-checkpoints")
    monkeypatch.setattr(nas_settings, "CHECKPOINT_DIR", str(stale))
    monkeypatch.delenv("SM_MODEL_DIR", raising=False)
    assert train_supernetwork.parse_args(["--data-dir", str(sample_data_dir)]).checkpoint_dir is None
    assert _start_epoch(monkeypatch, minilm_path, sample_data_dir, tmp_path) == 1
    assert "resuming" not in capsys.readouterr().out


def test_in_a_sagemaker_job_the_checkpoint_folder_beside_the_model_dir_is_resumed(
    monkeypatch, minilm_path, sample_data_dir, tmp_path, capsys
):
    """SageMaker (and the local job runner): CheckpointConfig's folder is `checkpoints` beside SM_MODEL_DIR."""
    import train_supernetwork

    (tmp_path / "job" / "model").mkdir(parents=True)
    monkeypatch.setenv("SM_MODEL_DIR", str(tmp_path / "job" / "model") + "/")
    assert train_supernetwork.parse_args([]).checkpoint_dir is None  # no CheckpointConfig: no folder, none
    checkpoints = _stale_checkpoint(minilm_path, tmp_path / "job" / "checkpoints")
    assert train_supernetwork.parse_args([]).checkpoint_dir == str(checkpoints)
    assert _start_epoch(monkeypatch, minilm_path, sample_data_dir, tmp_path) == 3
    assert f"resuming from {checkpoints / 'supernet'} at epoch 3" in capsys.readouterr().out
