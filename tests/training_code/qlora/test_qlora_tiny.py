"""The tiny-model builder that the tests and the demo share, through its CLI."""

from __future__ import annotations

from finetune.tiny import main
from qlora_test_helpers import QLORA_DIR


def test_cli_builds_a_loadable_tiny_llama_with_a_chat_template(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    main(
        [
            "--out",
            str(tmp_path / "tiny"),
            "--data",
            str(QLORA_DIR / "sample_data" / "instructions.jsonl"),
            "--chat-template",
            "--vocab-size",
            "320",
        ]
    )
    assert "tiny Llama saved" in capsys.readouterr().out
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tiny")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "tiny")
    assert tokenizer.chat_template and tokenizer.bos_token == "<s>" and tokenizer.eos_token == "</s>"
    assert model.config.vocab_size == len(tokenizer) <= 320
    assert 50_000 < sum(p.numel() for p in model.parameters()) < 1_000_000
    assert tokenizer.decode(tokenizer("NF4 keeps weights in 4 bits")["input_ids"], skip_special_tokens=True) == (
        "NF4 keeps weights in 4 bits"
    )


def test_cli_builds_another_familys_tiny_model_with_its_config_class(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Phi3Config

    main(
        [
            "--family",
            "phi3",
            "--out",
            str(tmp_path / "phi3"),
            "--data",
            str(QLORA_DIR / "sample_data" / "instructions.jsonl"),
        ]
    )
    assert "tiny phi3 (fused qkv_proj and gate_up_proj" in capsys.readouterr().out
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "phi3")
    assert isinstance(model.config, Phi3Config) and model.config.hidden_size == 128
    assert AutoTokenizer.from_pretrained(tmp_path / "phi3").chat_template  # vLLM's chat endpoint renders with it
