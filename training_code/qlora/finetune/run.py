"""One fine-tuning run, the same on a laptop CPU and in a SageMaker training job (train.py parses, this runs).

Loads the base model in 4-bit NF4, trains a LoRA adapter on the answers (resuming from the newest complete
checkpoint; a SIGTERM saves one), merges it into a full-precision copy of the base for serving, writes a model
card, model_kind.json and model_facts.json (read back from the saved files) beside it, and
training_report.json. Under torchrun each rank trains (DDP, or FSDP with --fsdp) and rank 0 merges.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .config import TrainConfig
from .distributed import current_world
from .metrics import format_metrics

if TYPE_CHECKING:
    from .data import PreparedData, Tokenized


@dataclass(kw_only=True)
class Trained:
    """What training hands the merge and the held-out evaluation; model and trainer are dropped to free memory."""

    tokenizer: Any
    model: Any
    trainer: Any
    trained_dir: str | None  # the saved adapter; None for full fine-tuning
    probe: dict[str, Any]
    trained_logits: Any  # the 4-bit model's own logits on the probe, for the report (None under FSDP)
    tokens_per_second: float | None
    eval_rows: list[Tokenized]
    eval_source: str | None


def load_for_training(config: TrainConfig, report) -> tuple[Any, PreparedData, Any]:
    """Tokenizer (with the chat template that renders the data), data and base model (+ LoRA)."""
    from .data import prepare_data
    from .model import (
        attach_lora,
        linear_weight_bytes,
        load_base_model,
        load_tokenizer,
        parameter_counts,
        resolve_target_modules,
        tied_targets,
        tied_targets_line,
    )
    from .templates import resolve_chat_template

    tokenizer = load_tokenizer(config.model_id)
    template, template_source = resolve_chat_template(tokenizer, config.chat_template)
    tokenizer.chat_template = template  # saved with the model: serving formats prompts as training did
    data = prepare_data(tokenizer, config, template)
    _print_data_losses(data.summary, config.max_seq_length)
    model = load_base_model(config)
    weights_gb = model.get_memory_footprint() / 1024**3  # before LoRA: the base weights as stored
    linear_gb = linear_weight_bytes(model) / 1024**3
    targets, tied = None, None
    if config.method != "full":
        targets = resolve_target_modules(model, config.target_modules)
        tied = tied_targets(model, targets)
        if tied:
            print(tied_targets_line(tied), flush=True)
        model = attach_lora(model, targets, config)
    report.set(
        data=data.summary,
        chat_template_source=template_source,
        target_modules=targets,
        tied_targets=tied,
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


def _fit(config: TrainConfig, report, trainer, stop_callback) -> None:
    """Train, resuming from the newest complete checkpoint; a SIGTERM saves a checkpoint and exits 143."""
    from .report import loss_curve
    from .trainer import resume_checkpoint, train_model

    resume_from, skipped = resume_checkpoint(config.checkpoint_dir, config.resume)
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
            report.write(config.output_dir)
        print(
            f"stopped by SIGTERM after step {stop_callback.saved_at_step}; checkpoint saved in "
            f"{config.checkpoint_dir}, rerun to resume",
            flush=True,
        )
        raise SystemExit(143)


def _train(config: TrainConfig, report, extra_callbacks) -> Trained:
    """Load, train and save the adapter; returns what the merge step needs."""
    from transformers import set_seed

    from .checkpoints import SaveOnSigterm, StopSignal
    from .merge import probe_batch, probe_logits
    from .report import loss_curve
    from .trainer import MetricLinesCallback, build_trainer

    set_seed(config.seed)
    with report.timed("load"):
        tokenizer, data, model = load_for_training(config, report)
    report.record_memory("load")
    metric_lines = MetricLinesCallback()
    stop = StopSignal().install()
    stop_callback = SaveOnSigterm(stop)
    callbacks = [metric_lines, stop_callback, *(extra_callbacks or [])]
    trainer = build_trainer(model, config, data, tokenizer, callbacks)
    try:
        _fit(config, report, trainer, stop_callback)
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
    if config.method != "full":  # full fine-tuning has no adapter: its weights go straight to the model dir
        trained_dir = os.path.join(config.output_dir, "adapter")
        trainer.save_model(trained_dir)  # collective under FSDP; writes on rank 0
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(trained_dir)
    probe = probe_batch(data.eval or data.train, tokenizer.pad_token_id)
    # The 4-bit model's own logits, for the report; a sharded (FSDP) model has no single copy to probe.
    trained_logits = (
        probe_logits(model, probe) if config.merge and not config.fsdp and current_world().is_main else None
    )
    return Trained(
        tokenizer=tokenizer,
        model=model,
        trainer=trainer,
        trained_dir=trained_dir,
        probe=probe,
        trained_logits=trained_logits,
        tokens_per_second=throughput["tokens_per_second"],
        eval_rows=data.eval_rows,
        eval_source=data.summary["eval"]["source"],
    )


def _evaluate(config: TrainConfig, report, trained: Trained, name: str, model) -> dict[str, Any] | None:
    """One side of the held-out evaluation (finetune.evaluate), timed; None without eval rows."""
    from .evaluate import evaluate_model

    if not trained.eval_rows:
        return None
    with report.timed(f"evaluate_{name}"):
        return evaluate_model(model, trained.tokenizer, trained.eval_rows, config)


def _record_evaluation(
    config: TrainConfig, report, trained: Trained, base, tuned, tuned_as: str, saved: bool
) -> dict[str, Any] | None:
    """evaluation.json beside the saved model, in the report, and as one metric line."""
    from .evaluate import evaluation_record, metric_values, write_evaluation

    if base is None or tuned is None:
        return None
    notes = {
        "tuned_model": tuned_as,
        "dtype": config.merge_dtype,
        "max_new_tokens": config.eval_max_new_tokens,
        "base_model": config.model_id,
    }
    record = evaluation_record(base, tuned, len(trained.eval_rows), trained.eval_source, notes)
    report.set(evaluation=record)
    if saved:
        write_evaluation(config.model_dir, record)
    print(format_metrics(**metric_values(record)), flush=True)
    return record


def _merge(config: TrainConfig, report, trained: Trained) -> Any:
    """Merge (or, for full fine-tuning, cast) and save for serving; returns the merge check or None.

    The base is evaluated as the merge loads it (full precision, --merge_dtype), then the merged model, on the
    same held-out tokens: the gap is the adapter's alone, not the 4-bit quantization's.
    """
    from .merge import compare_logits, free_memory, load_full_precision, merge_adapter, save_for_serving
    from .model import DTYPES

    model, tokenizer = trained.model, trained.tokenizer
    trained.model = trained.trainer = None
    if config.method == "full":
        model.config._attn_implementation = "sdpa"  # the packed-row attention is for training only
        model = model.to(DTYPES[config.merge_dtype])
        base_model = load_full_precision(config.model_id, config.merge_dtype)
        base = _evaluate(config, report, trained, "base", base_model)
        del base_model
        tuned = _evaluate(config, report, trained, "merged", model)
        with report.timed("merge"):
            saved = save_for_serving(model, tokenizer, config.model_dir, config.max_shard_size)
        report.set(merge={"files": saved, "check": None})
        _record_evaluation(config, report, trained, base, tuned, "full fine-tune", True)
        return None
    del model
    free_memory()
    base_model = load_full_precision(config.model_id, config.merge_dtype)
    base = _evaluate(config, report, trained, "base", base_model)
    with report.timed("merge"):
        merged, check, merged_logits = merge_adapter(
            base_model, trained.trained_dir, config.merge_dtype, trained.probe, config.merge_tolerance
        )
    tuned = _evaluate(config, report, trained, "merged", merged)
    with report.timed("save"):
        saved = save_for_serving(merged, tokenizer, config.model_dir, config.max_shard_size) if check.passed else []
    merge: dict[str, Any] = {"files": saved, "check": asdict(check)}
    if trained.trained_logits is not None:
        gap = compare_logits(trained.trained_logits, merged_logits, config.merge_dtype, None)
        merge["trained_vs_merged"] = {
            "max_abs_logit_diff": gap.max_abs_logit_diff,
            "relative_diff": gap.relative_diff,
            "note": "4-bit training model vs merged full-precision model; informative only",
        }
    report.set(merge=merge)
    _record_evaluation(config, report, trained, base, tuned, "merged", check.passed)
    return check


def _save_adapter(config: TrainConfig, report, trained: Trained) -> None:
    """--no-merge: the adapter as trained; evaluated on the full-precision base, unmerged (same figures)."""
    from peft import PeftModel

    from .merge import free_memory, load_full_precision

    with report.timed("save"):
        trained.model.save_pretrained(config.model_dir)
        trained.tokenizer.save_pretrained(config.model_dir)
    if config.method == "full":
        return
    trained.model = trained.trainer = None
    free_memory()
    base_model = load_full_precision(config.model_id, config.merge_dtype)
    base = _evaluate(config, report, trained, "base", base_model)
    adapted = PeftModel.from_pretrained(base_model, trained.trained_dir)
    tuned = _evaluate(config, report, trained, "merged", adapted)
    _record_evaluation(config, report, trained, base, tuned, "adapter on the full-precision base (--no-merge)", True)


def _save_outputs(config: TrainConfig, report, trained: Trained) -> Any:
    """On rank 0: the merged model (or the adapter with --no-merge), its evaluation, card, model_kind.json and,
    for a merged model, model_facts.json."""
    from .card import write_model_card, write_model_kind
    from .facts import write_model_facts

    check = None
    if config.merge:
        check = _merge(config, report, trained)
        kind = "full" if config.method == "full" else "merged"
    else:
        kind = "adapter" if config.method != "full" else "full"
        _save_adapter(config, report, trained)
    if check is None or check.passed:
        report.set(model_kind=kind)
        write_model_card(config.model_dir, report.data, kind)
        write_model_kind(config.model_dir, kind, config.model_id)
        if config.merge:  # a servable folder: what the registry records about it, read from its files
            report.set(model_facts=write_model_facts(config.model_dir, config.model_id))
    return check


def _prepare_base(config: TrainConfig) -> None:
    """Before any weight is loaded: the token of a gated or private base, when the job names its secret; then the
    base against its record, when the job passes one (the Training stack does)."""
    from .base_record import check_base_record
    from .hub_token import TOKEN_VARIABLE, read_hub_token

    arn = read_hub_token()
    if arn is not None:
        print(f"hub token: read from secret {arn} into {TOKEN_VARIABLE} (not printed)", flush=True)
    checked = check_base_record(config.model_id, channel=bool(config.model_channel))
    if checked is not None:
        record, found = checked
        print(f"base model {config.model_id}: {', '.join(sorted(found))} as {record} records them", flush=True)


def run(config: TrainConfig, extra_callbacks: list | None = None) -> dict[str, Any]:
    """Train (and merge) with train.py's parsed settings; returns the report. extra_callbacks are Trainer
    callbacks, for tests."""
    from .base_record import BaseRecordError
    from .cpu_4bit import InferenceLayoutError
    from .distributed import barrier
    from .hub_token import HubTokenError
    from .merge import MergeCheckError
    from .model import ModelShapeError
    from .report import RunReport
    from .rows import DataError

    world = current_world()
    report = RunReport(config.as_dict())
    report.set(world={"world_size": world.world_size, "rank": world.rank, "fsdp": config.fsdp})
    try:
        _prepare_base(config)
        trained = _train(config, report, extra_callbacks)
    except (DataError, ModelShapeError, InferenceLayoutError, HubTokenError, BaseRecordError) as error:
        raise SystemExit(f"train.py: error: {error}") from error
    barrier()
    if not world.is_main:  # the merge needs one process; the others are done once the adapter is saved
        return report.data
    check = _save_outputs(config, report, trained)
    report.record_memory("total")
    path = report.write(config.output_dir)
    print(
        format_metrics(
            tokens_per_second=trained.tokens_per_second,
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
