"""QLoRA fine-tuning entry point, the same on a laptop CPU and in a SageMaker training job.

Loads the base model in 4-bit NF4, trains a LoRA adapter (resuming from the newest checkpoint), merges it
into a full-precision copy of the base for LMI serving, and writes training_report.json. See --help.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling qlora_* modules, as SageMaker runs us

from qlora_args import parse_args  # noqa: E402
from qlora_metrics import format_metrics  # noqa: E402


def _train(args, report, extra_callbacks) -> dict[str, Any]:
    """Load, train and save the adapter; returns what the merge step needs."""
    from qlora_data import prepare_data
    from qlora_merge import probe_batch, probe_logits
    from qlora_model import (
        attach_lora,
        load_base_model,
        load_tokenizer,
        parameter_counts,
        resolve_target_modules,
    )
    from qlora_report import loss_curve
    from qlora_trainer import MetricLinesCallback, build_trainer, newest_checkpoint, train_model
    from transformers import set_seed

    set_seed(args.seed)
    with report.timed("load"):
        tokenizer = load_tokenizer(args.model_id)
        data = prepare_data(
            tokenizer,
            args.train_data,
            args.eval_data,
            args.eval_fraction,
            args.max_seq_length,
            args.packing,
            args.seed,
        )
        model = load_base_model(
            args.model_id,
            args.method,
            args.compute_dtype,
            args.double_quant,
            args.quant_type,
            args.gradient_checkpointing,
        )
        weights_gb = model.get_memory_footprint() / 1024**3  # before LoRA: the base weights as stored
        targets = None
        if args.method != "full":
            targets = resolve_target_modules(model, args.target_modules)
            model = attach_lora(model, targets, args.lora_r, args.lora_alpha, args.lora_dropout)
    report.record_memory("load")
    report.set(data=data.summary, target_modules=targets, parameters=parameter_counts(model),
               base_weights_gb=round(weights_gb, 4))

    metric_lines = MetricLinesCallback()
    trainer = build_trainer(
        model, args, data.train, data.eval, tokenizer.pad_token_id, [metric_lines, *(extra_callbacks or [])]
    )
    resume_from = newest_checkpoint(args.checkpoint_dir, args.resume)
    if resume_from:
        print(f"resuming from {resume_from}", flush=True)
    with report.timed("train"):
        train_metrics = train_model(trainer, resume_from)
    eval_metrics = trainer.evaluate() if data.eval else {}
    report.record_memory("train")
    throughput = metric_lines.summary()
    report.set(
        resumed_from=resume_from,
        train_metrics=train_metrics,
        eval_metrics=eval_metrics,
        loss_curve=loss_curve(trainer.state.log_history),
        throughput=throughput,
    )
    trained_dir = None
    if args.method != "full":  # full fine-tuning has no adapter: its weights go straight to the model dir
        trained_dir = os.path.join(args.output_dir, "adapter")
        trainer.save_model(trained_dir)
        tokenizer.save_pretrained(trained_dir)
    probe = probe_batch(data.eval or data.train, tokenizer.pad_token_id)
    trained_logits = probe_logits(model, probe) if args.merge else None
    return {
        "tokenizer": tokenizer,
        "model": model,
        "trained_dir": trained_dir,
        "probe": probe,
        "trained_logits": trained_logits,
        "tokens_per_second": throughput["tokens_per_second"],
    }


def _merge(args, report, trained: dict[str, Any]) -> Any:
    """Merge (or, for full fine-tuning, cast) and save for serving; returns the merge check or None."""
    from qlora_merge import compare_logits, free_memory, merge_adapter, save_for_serving
    from qlora_model import DTYPES

    model, tokenizer = trained.pop("model"), trained["tokenizer"]
    with report.timed("merge"):
        if args.method == "full":
            saved = save_for_serving(
                model.to(DTYPES[args.merge_dtype]), tokenizer, args.model_dir, args.max_shard_size
            )
            report.set(merge={"files": saved, "check": None})
            return None
        del model
        free_memory()
        merged, check, merged_logits = merge_adapter(
            args.model_id, trained["trained_dir"], args.merge_dtype, trained["probe"], args.merge_tolerance
        )
        quantization_gap = compare_logits(trained["trained_logits"], merged_logits, args.merge_dtype, None)
        saved = (
            save_for_serving(merged, tokenizer, args.model_dir, args.max_shard_size) if check.passed else []
        )
    report.set(
        merge={
            "files": saved,
            "check": asdict(check),
            "trained_vs_merged": {
                "max_abs_logit_diff": quantization_gap.max_abs_logit_diff,
                "relative_diff": quantization_gap.relative_diff,
                "note": "4-bit training model vs merged full-precision model; informative only",
            },
        }
    )
    return check


def main(argv: list[str] | None = None, extra_callbacks: list | None = None) -> dict[str, Any]:
    """Run training (and merge); returns the report. extra_callbacks are Trainer callbacks, for tests."""
    from qlora_merge import MergeCheckError
    from qlora_report import RunReport

    args = parse_args(argv)
    report = RunReport(vars(args).copy())
    trained = _train(args, report, extra_callbacks)
    check = None
    if args.merge:
        check = _merge(args, report, trained)
    else:
        with report.timed("save"):
            trained["model"].save_pretrained(args.model_dir)
            trained["tokenizer"].save_pretrained(args.model_dir)
    report.record_memory("total")
    path = report.write(args.output_dir)
    print(
        format_metrics(
            tokens_per_second=trained["tokens_per_second"],
            peak_memory_gb=report.data["peak_memory_gb"]["train"]["gpu"]
            or report.data["peak_memory_gb"]["train"]["rss"],
            merge_max_abs_logit_diff=check.max_abs_logit_diff if check else None,
        ),
        flush=True,
    )
    print(f"report written to {path}", flush=True)
    if check is not None and not check.passed:
        raise MergeCheckError(
            f"merged logits differ from the adapter model's by {check.relative_diff:.3g} (relative), "
            f"above the tolerance {check.relative_tolerance:.3g}; merged model not saved"
        )
    return report.data


if __name__ == "__main__":
    main()
