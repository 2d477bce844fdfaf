"""One fine-tuning run, the same on a laptop CPU and in a SageMaker training job (train.py parses, this runs).

Loads the base model in 4-bit NF4, trains a LoRA adapter on the answers (resuming from the newest complete
checkpoint; a SIGTERM saves one), merges it into a full-precision copy of the base for serving, writes a model
card, model_kind.json and model_facts.json (read back from the saved files) beside it, and
training_report.json. Under torchrun each rank trains (DDP, or FSDP with --fsdp) and rank 0 merges.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict
from typing import Any

from .distributed import current_world
from .metrics import format_metrics


def _load(args, report):
    """Tokenizer (with the chat template that renders the data), data and base model (+ LoRA)."""
    from .data import DataOptions, DataSources, prepare_data
    from .model import (
        attach_lora,
        linear_weight_bytes,
        load_base_model,
        load_tokenizer,
        parameter_counts,
        resolve_target_modules,
    )
    from .templates import resolve_chat_template

    tokenizer = load_tokenizer(args.model_id)
    template, template_source = resolve_chat_template(tokenizer, args.chat_template)
    tokenizer.chat_template = template  # saved with the model: serving formats prompts as training did
    sources = DataSources(
        args.train_data,
        args.eval_data,
        args.eval_fraction,
        args.train_split,
        args.eval_split,
        args.train_files,
        args.eval_files,
        args.min_eval_rows,
    )
    options = DataOptions(
        args.max_seq_length, args.packing, args.train_on_inputs, args.truncation, template, args.pack_length
    )
    data = prepare_data(tokenizer, sources, options, args.seed)
    _print_data_losses(data.summary, args.max_seq_length)
    model = load_base_model(
        args.model_id,
        args.method,
        args.compute_dtype,
        args.double_quant,
        args.quant_type,
        args.gradient_checkpointing,
        args.fsdp,
        packed=args.packing,
    )
    weights_gb = model.get_memory_footprint() / 1024**3  # before LoRA: the base weights as stored
    linear_gb = linear_weight_bytes(model) / 1024**3
    targets = None
    if args.method != "full":
        targets = resolve_target_modules(model, args.target_modules)
        model = attach_lora(model, targets, args.lora_r, args.lora_alpha, args.lora_dropout)
    report.set(
        data=data.summary,
        chat_template_source=template_source,
        target_modules=targets,
        parameters=parameter_counts(model),
        base_weights_gb=round(weights_gb, 4),
        linear_weights_gb=round(linear_gb, 4),
    )
    return tokenizer, data, model


def _print_data_losses(summary: dict[str, Any], max_seq_length: int) -> None:
    """One line per split that lost rows, so a too-short max_seq_length is seen in the job log, not only later."""
    for part in ("train", "eval"):
        counts = summary[part]
        if counts["dropped_too_long"] or counts["dropped_no_supervised_tokens"] or counts["truncated_rows"]:
            print(
                f"{part} data: {counts['rows']} rows, {counts['dropped_too_long']} dropped as longer than "
                f"max_seq_length {max_seq_length}, {counts['dropped_no_supervised_tokens']} dropped with no "
                f"answer token left, {counts['truncated_rows']} cut keeping their EOS (see --truncation)",
                flush=True,
            )


def _fit(args, report, trainer, stop_callback) -> None:
    """Train, resuming from the newest complete checkpoint; a SIGTERM saves a checkpoint and exits 143."""
    from .report import loss_curve
    from .trainer import resume_checkpoint, train_model

    resume_from, skipped = resume_checkpoint(args.checkpoint_dir, args.resume)
    for item in skipped:
        print(f"skipping incomplete checkpoint {item['checkpoint']}: {item['reason']}", flush=True)
    if resume_from:
        print(f"resuming from {resume_from}", flush=True)
    with report.timed("train"):
        train_metrics = train_model(trainer, resume_from)
    report.set(
        resumed_from=resume_from,
        skipped_checkpoints=skipped,
        train_metrics=train_metrics,
        loss_curve=loss_curve(trainer.state.log_history),
    )  # again after the final evaluation
    if stop_callback.saved_at_step is not None:
        report.set(stopped_by_sigterm_at_step=stop_callback.saved_at_step)
        if trainer.is_world_process_zero():
            report.write(args.output_dir)
        print(
            f"stopped by SIGTERM after step {stop_callback.saved_at_step}; checkpoint saved in "
            f"{args.checkpoint_dir}, rerun to resume",
            flush=True,
        )
        raise SystemExit(143)


def _train(args, report, extra_callbacks) -> dict[str, Any]:
    """Load, train and save the adapter; returns what the merge step needs."""
    from transformers import set_seed

    from .checkpoints import SaveOnSigterm, StopSignal
    from .merge import probe_batch, probe_logits
    from .report import loss_curve
    from .trainer import MetricLinesCallback, build_trainer

    set_seed(args.seed)
    with report.timed("load"):
        tokenizer, data, model = _load(args, report)
    report.record_memory("load")
    metric_lines = MetricLinesCallback()
    stop = StopSignal().install()
    stop_callback = SaveOnSigterm(stop)
    trainer = build_trainer(
        model,
        args,
        data.train,
        data.eval,
        tokenizer.pad_token_id,
        [metric_lines, stop_callback, *(extra_callbacks or [])],
    )
    try:
        _fit(args, report, trainer, stop_callback)
    finally:
        stop.uninstall()
    eval_metrics = trainer.evaluate() if data.eval else {}
    report.record_memory("train")
    throughput = metric_lines.summary()
    report.set(
        eval_metrics=eval_metrics,
        throughput=throughput,
        loss_curve=loss_curve(trainer.state.log_history),
        best_checkpoint=trainer.state.best_model_checkpoint,
    )
    trained_dir = None
    if trainer.is_fsdp_enabled:  # one full adapter file for the merge, not one shard per rank
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    if args.method != "full":  # full fine-tuning has no adapter: its weights go straight to the model dir
        trained_dir = os.path.join(args.output_dir, "adapter")
        trainer.save_model(trained_dir)  # collective under FSDP; writes on rank 0
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(trained_dir)
    probe = probe_batch(data.eval or data.train, tokenizer.pad_token_id)
    # The 4-bit model's own logits, for the report; a sharded (FSDP) model has no single copy to probe.
    trained_logits = probe_logits(model, probe) if args.merge and not args.fsdp and current_world().is_main else None
    return {
        "tokenizer": tokenizer,
        "model": model,
        "trainer": trainer,
        "trained_dir": trained_dir,
        "probe": probe,
        "trained_logits": trained_logits,
        "tokens_per_second": throughput["tokens_per_second"],
        "eval_rows": data.eval_rows,
        "eval_source": data.summary["eval"]["source"],
    }


def _evaluate(args, report, trained: dict[str, Any], name: str, model) -> dict[str, Any] | None:
    """One side of the held-out evaluation (finetune.evaluate), timed; None without eval rows."""
    from .evaluate import EvalSettings, evaluate_model

    if not trained["eval_rows"]:
        return None
    settings = EvalSettings(args.eval_generations, args.eval_max_new_tokens, args.per_device_batch_size)
    with report.timed(f"evaluate_{name}"):
        return evaluate_model(model, trained["tokenizer"], trained["eval_rows"], settings)


def _record_evaluation(args, report, trained, base, tuned, tuned_as: str, saved: bool) -> dict[str, Any] | None:
    """evaluation.json beside the saved model, in the report, and as one metric line."""
    from .evaluate import evaluation_record, metric_values, write_evaluation

    if base is None or tuned is None:
        return None
    notes = {
        "tuned_model": tuned_as,
        "dtype": args.merge_dtype,
        "max_new_tokens": args.eval_max_new_tokens,
        "base_model": args.model_id,
    }
    record = evaluation_record(base, tuned, len(trained["eval_rows"]), trained["eval_source"], notes)
    report.set(evaluation=record)
    if saved:
        write_evaluation(args.model_dir, record)
    print(format_metrics(**metric_values(record)), flush=True)
    return record


def _merge(args, report, trained: dict[str, Any]) -> Any:
    """Merge (or, for full fine-tuning, cast) and save for serving; returns the merge check or None.

    The base is evaluated as the merge loads it (full precision, --merge_dtype), then the merged model, on the
    same held-out tokens: the gap is the adapter's alone, not the 4-bit quantization's.
    """
    from .merge import compare_logits, free_memory, load_full_precision, merge_adapter, save_for_serving
    from .model import DTYPES

    model, tokenizer = trained.pop("model"), trained["tokenizer"]
    trained.pop("trainer")
    if args.method == "full":
        model.config._attn_implementation = "sdpa"  # the packed-row attention is for training only
        model = model.to(DTYPES[args.merge_dtype])
        base_model = load_full_precision(args.model_id, args.merge_dtype)
        base = _evaluate(args, report, trained, "base", base_model)
        del base_model
        tuned = _evaluate(args, report, trained, "merged", model)
        with report.timed("merge"):
            saved = save_for_serving(model, tokenizer, args.model_dir, args.max_shard_size)
        report.set(merge={"files": saved, "check": None})
        _record_evaluation(args, report, trained, base, tuned, "full fine-tune", True)
        return None
    del model
    free_memory()
    base_model = load_full_precision(args.model_id, args.merge_dtype)
    base = _evaluate(args, report, trained, "base", base_model)
    with report.timed("merge"):
        merged, check, merged_logits = merge_adapter(
            base_model, trained["trained_dir"], args.merge_dtype, trained["probe"], args.merge_tolerance
        )
    tuned = _evaluate(args, report, trained, "merged", merged)
    with report.timed("save"):
        saved = save_for_serving(merged, tokenizer, args.model_dir, args.max_shard_size) if check.passed else []
    merge: dict[str, Any] = {"files": saved, "check": asdict(check)}
    if trained["trained_logits"] is not None:
        gap = compare_logits(trained["trained_logits"], merged_logits, args.merge_dtype, None)
        merge["trained_vs_merged"] = {
            "max_abs_logit_diff": gap.max_abs_logit_diff,
            "relative_diff": gap.relative_diff,
            "note": "4-bit training model vs merged full-precision model; informative only",
        }
    report.set(merge=merge)
    _record_evaluation(args, report, trained, base, tuned, "merged", check.passed)
    return check


def _save_adapter(args, report, trained: dict[str, Any]) -> None:
    """--no-merge: the adapter as trained; evaluated on the full-precision base, unmerged (same figures)."""
    from peft import PeftModel

    from .merge import free_memory, load_full_precision

    with report.timed("save"):
        trained["model"].save_pretrained(args.model_dir)
        trained["tokenizer"].save_pretrained(args.model_dir)
    if args.method == "full":
        return
    del trained["model"]
    trained.pop("trainer")
    free_memory()
    base_model = load_full_precision(args.model_id, args.merge_dtype)
    base = _evaluate(args, report, trained, "base", base_model)
    adapted = PeftModel.from_pretrained(base_model, trained["trained_dir"])
    tuned = _evaluate(args, report, trained, "merged", adapted)
    _record_evaluation(args, report, trained, base, tuned, "adapter on the full-precision base (--no-merge)", True)


def _save_outputs(args, report, trained) -> Any:
    """On rank 0: the merged model (or the adapter with --no-merge), its evaluation, card, model_kind.json and,
    for a merged model, model_facts.json."""
    from .card import write_model_card, write_model_kind
    from .facts import write_model_facts

    check = None
    if args.merge:
        check = _merge(args, report, trained)
        kind = "full" if args.method == "full" else "merged"
    else:
        kind = "adapter" if args.method != "full" else "full"
        _save_adapter(args, report, trained)
    if check is None or check.passed:
        report.set(model_kind=kind)
        write_model_card(args.model_dir, report.data, kind)
        write_model_kind(args.model_dir, kind, args.model_id)
        if args.merge:  # a servable folder: what the registry records about it, read from its files
            report.set(model_facts=write_model_facts(args.model_dir, args.model_id))
    return check


def run(args: argparse.Namespace, extra_callbacks: list | None = None) -> dict[str, Any]:
    """Train (and merge) with train.py's parsed arguments; returns the report. extra_callbacks are Trainer
    callbacks, for tests."""
    from .distributed import barrier
    from .merge import MergeCheckError
    from .model import ModelShapeError
    from .report import RunReport
    from .rows import DataError

    world = current_world()
    report = RunReport(vars(args).copy())
    report.set(world={"world_size": world.world_size, "rank": world.rank, "fsdp": args.fsdp})
    try:
        trained = _train(args, report, extra_callbacks)
    except (DataError, ModelShapeError) as error:
        raise SystemExit(f"train.py: error: {error}") from error
    barrier()
    if not world.is_main:  # the merge needs one process; the others are done once the adapter is saved
        return report.data
    check = _save_outputs(args, report, trained)
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
