"""A QA-shaped start built from unlabelled text (``uda-qa-start``): a SQuAD 2.0 reader trained on
synthetic questions (:mod:`tasks.qa.synthetic`) and saved as a normal Hugging Face checkpoint, which
``--task squad_v2`` and ``--task passages`` then take as ``--model.name_or_path``.

The reader is the squad_v2 task's own (encoder + span head + answerability head, its supervised loss),
so fine-tuning starts with both heads trained. The tokenizer gains the ``[QUESTION]`` token, saved with
it; the squad_v2 and passages tasks append `` [QUESTION].`` to every real question when the tokenizer
knows the token (automatically, in ``tasks.qa.data.clip_questions``), as Splinter does at fine-tuning.

The loop below is a plain one (AdamW, linear warm-up and decay, optional bf16 autocast), separate from
``uda.train``: it has no labelled/unlabelled split, no dev selection and no consistency loss, only a
held-out set of synthetic examples from paragraphs kept out of training, whose span accuracy is logged.
It saves a checkpoint every ``--checkpoint_minutes`` and on Ctrl-C/SIGTERM, and the same command
continues from it, with the same batches and dropout draws as an uninterrupted run.

Output folder::

    settings.json           what the run was asked (a rerun with other settings is refused)
    synthetic_counts.json   examples and features of each kind, training and held-out
    synthetic_sample.jsonl  the first 100 training examples, to read
    data_info.json          which SQuAD articles' text was used (the squad_v2 task refuses a start that
                            read its dev or test articles), and the text files read
    metrics.jsonl, tb/      training loss and held-out accuracy (TensorBoard)
    checkpoint.pt           the latest checkpoint (removed when the run finishes)
    model/                  the start: config, weights, tokenizer with [QUESTION]
    results.json            final held-out accuracy, steps, wall and CPU time
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from tasks.qa.synthetic import (QUESTION_TOKEN, chunk_text, kind_counts, normalised_sentences, synthetic_examples)

FORMAT = "uda-qa-start/1"
HELD_OUT_EVERY = 25  # every 25th paragraph's examples are held out of training (the held-out accuracy)


class StartError(ValueError):
    """A bad option or input of the start-building run (printed as ``error: ...``)."""


# ----------------------------------------------------------------------------- texts

def squad_paragraphs(path: str, test_articles: int, dev_articles: int) -> tuple[list, dict, set[str]]:
    """Paragraphs of the SQuAD file's articles that are neither test nor dev in the task's split
    (sha256(title) order), the split's article titles, and the normalised sentences of the test and dev
    paragraphs. Paragraphs are read whether or not they have questions."""
    from tasks.qa.data import article_order, find_squad_json, load_squad_file

    load_squad_file(path)  # the task's own checks of the layout, with its error messages
    obj = json.loads(find_squad_json(Path(path).expanduser()).read_text(encoding="utf-8-sig"))
    items = [(str(a.get("title", f"article-{i}")), p["context"]) for i, a in enumerate(obj["data"])
             for p in a.get("paragraphs", []) if isinstance(p.get("context"), str)]
    order = article_order([t for t, _ in items])
    if len(order) <= test_articles + dev_articles:
        raise StartError(f"--squad '{path}' has {len(order)} articles, and the split's --test_articles "
                         f"{test_articles} + --dev_articles {dev_articles} hold out all of them: lower them to "
                         f"those of the squad_v2 runs this start is for")
    held = set(order[:test_articles + dev_articles])
    seen, paras, held_sents = set(), [], set()
    for title, context in items:
        if (title, context) in seen:
            continue
        seen.add((title, context))
        if title in held:
            held_sents |= normalised_sentences(context)
        else:
            paras.append((title, context))
    articles = {"test": order[:test_articles], "dev": order[test_articles:test_articles + dev_articles],
                "unlabeled_pool": order[test_articles + dev_articles:]}
    return paras, articles, held_sents


def read_texts(path: str, text_column: str, limit: Optional[int]) -> list[str]:
    """Texts of a .txt file (paragraphs separated by blank lines), a .json/.jsonl(.gz) file (the
    ``text_column`` of each record) or a folder of such files (sorted)."""
    from uda.io import iter_jsonl, open_text

    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and _text_file(f))
        if not files:
            raise StartError(f"--texts folder '{p}' holds no .txt, .json or .jsonl(.gz) file")
    elif p.is_file():
        files = [p]
    else:
        raise StartError(f"--texts '{p}' does not exist; give a .txt, .json or .jsonl(.gz) file or a folder of them")
    out: list[str] = []
    for f in files:
        name = f.name.lower()
        if name.endswith((".txt", ".txt.gz")):
            with open_text(f) as fh:
                out += [b.strip() for b in fh.read().split("\n\n") if b.strip()]
        elif name.endswith((".jsonl", ".jsonl.gz")):
            for lineno, row in iter_jsonl(f):
                out.append(_column(row, text_column, f, lineno))
                if limit is not None and len(out) >= limit:
                    break
        else:
            with open_text(f) as fh:
                try:
                    obj = json.load(fh)
                except json.JSONDecodeError as e:
                    raise StartError(f"--texts file '{f}' is not valid JSON (line {e.lineno}: {e.msg})") from None
            if isinstance(obj, dict) and "data" in obj:
                raise StartError(f"--texts file '{f}' is a SQuAD file: pass it as --squad, so that its test and dev "
                                 f"articles are held out")
            rows = obj if isinstance(obj, list) else [obj]
            out += [_column(r, text_column, f, i + 1) for i, r in enumerate(rows)]
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


def _text_file(f: Path) -> bool:
    return f.name.lower().endswith((".txt", ".txt.gz", ".json", ".jsonl", ".jsonl.gz"))


def _column(row: Any, column: str, f: Path, where: int) -> str:
    if isinstance(row, str):
        return row
    if not isinstance(row, dict) or not isinstance(row.get(column), str):
        raise StartError(f"--texts file '{f}', record {where}: no text column '{column}' (choose it with "
                         f"--text_column)")
    return row[column]


def collect_paragraphs(args: argparse.Namespace) -> tuple[list[tuple[str, str, str]], dict]:
    """(paragraph id, title, text) triples from --squad and --texts, and the data_info record. A text
    sharing a sentence with a test or dev paragraph of --squad is an error naming it."""
    paras: list[tuple[str, str, str]] = []
    info: dict = {"squad": None, "articles": {}, "texts": []}
    held_sents: set[str] = set()
    if args.squad:
        sq, articles, held_sents = squad_paragraphs(args.squad, args.test_articles, args.dev_articles)
        info["squad"] = str(Path(args.squad).expanduser().resolve())
        info["held_out_articles"] = {"test": articles["test"], "dev": articles["dev"]}
        if args.squad_paragraphs:
            paras += [(f"squad{i}", t, c) for i, (t, c) in enumerate(sq)]
            info["articles"] = {"unlabeled_pool": sorted({t for t, _ in sq})}
    for k, path in enumerate(args.texts or []):
        texts = read_texts(path, args.text_column, args.max_texts)
        n0 = len(paras)
        for i, t in enumerate(texts):
            if held_sents:
                shared = normalised_sentences(t) & held_sents
                if shared:
                    raise StartError(f"--texts '{path}', text {i + 1} shares a sentence with a test or dev article "
                                     f"of --squad ({next(iter(shared))[:80]!r}); test and dev text must not be "
                                     f"trained on: remove it")
            for j, chunk in enumerate(chunk_text(t, args.chunk_words)):
                paras.append((f"t{k}-{i}-{j}", Path(path).name, chunk))
        info["texts"].append({"path": str(Path(path).expanduser().resolve()), "texts": len(texts),
                              "paragraphs": len(paras) - n0})
    if not paras:
        raise StartError("no text to build questions from: give --squad FILE (its non-test, non-dev paragraphs) "
                         "and/or --texts PATH")
    info["held_out_check"] = ("texts checked against the test and dev articles of --squad" if held_sents else
                              "none: no --squad given, so nothing tells which text is held out")
    return paras, info


# ----------------------------------------------------------------------------- features and batches

def add_question_token(tokenizer: Any, model: Any) -> None:
    """Add ``[QUESTION]`` to the tokenizer (as a special token: never split, never lower-cased) and a
    row for it to the model's word embeddings, initialised as the mask token's (or the mean) row."""
    import torch

    if QUESTION_TOKEN in tokenizer.get_vocab():
        return
    tokenizer.add_special_tokens({"additional_special_tokens": [QUESTION_TOKEN]})
    span = model.span_model
    span.resize_token_embeddings(len(tokenizer))
    emb = span.get_input_embeddings().weight
    new = tokenizer.convert_tokens_to_ids(QUESTION_TOKEN)
    with torch.no_grad():
        mask = tokenizer.mask_token_id
        emb[new] = emb[mask] if mask is not None and mask < new else emb[:new].mean(0)


def start_features(tokenizer: Any, examples: Sequence[dict], args: argparse.Namespace) -> list[dict]:
    """Labelled features of the synthetic examples: for an answerable example the windows that hold its
    answer, for an unanswerable one its first window (so that the kinds keep their proportions); a
    question cut to ``--max_question_length`` before its ``[QUESTION]`` token is left out."""
    from tasks.qa.data import build_features

    if not examples:
        return []
    # mark=False: a synthetic question holds its [QUESTION] token already, where its answer was
    feats = build_features(tokenizer, examples, args.max_length, args.doc_stride, args.max_question_length, True,
                           mark=False)
    out, first_seen = [], set()
    token_id = tokenizer.convert_tokens_to_ids(QUESTION_TOKEN)
    for f in feats:
        ex = examples[f["example_index"]]
        if token_id not in f["input_ids"]:  # the question was cut before its token: nothing to point from
            continue
        if ex["is_impossible"]:
            if f["example_index"] in first_seen:
                continue
            first_seen.add(f["example_index"])
        elif not f["answerable"]:
            continue
        f["kind"] = ex["kind"]
        out.append(f)
    return out


def epoch_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """One epoch's batches: a seeded permutation, cut into groups of 32 batches sorted by length (less
    padding on a CPU), the batches then shuffled; the last incomplete batch is dropped."""
    rng = np.random.default_rng([seed, 7, epoch])
    perm = rng.permutation(len(lengths))
    group = batch_size * 32
    batches = []
    for a in range(0, len(perm), group):
        chunk = sorted(perm[a:a + group].tolist(), key=lambda i: lengths[i])
        batches += [chunk[b:b + batch_size] for b in range(0, len(chunk) - batch_size + 1, batch_size)]
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


class BatchPlan:
    """Step -> batch of feature indices, over as many epochs as needed; resumable from the step alone."""

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int) -> None:
        self.lengths, self.batch_size, self.seed = list(lengths), batch_size, seed
        self.per_epoch = len(epoch_batches(self.lengths, batch_size, seed, 0))
        if self.per_epoch == 0:
            raise StartError(f"fewer synthetic features ({len(self.lengths)}) than one batch ({batch_size}): give "
                             f"more text or lower --batch_size")
        self._cache: dict[int, list[list[int]]] = {}

    def __call__(self, step: int) -> list[int]:
        epoch, i = divmod(step, self.per_epoch)
        if epoch not in self._cache:
            self._cache = {epoch: epoch_batches(self.lengths, self.batch_size, self.seed, epoch)}
        return self._cache[epoch][i]


# ----------------------------------------------------------------------------- the run

SETTINGS = ("model", "squad", "squad_paragraphs", "texts", "text_column", "max_texts", "chunk_words", "test_articles",
            "dev_articles", "per_paragraph", "recurring", "cloze", "unanswerable", "max_length", "doc_stride",
            "max_question_length", "batch_size", "lr", "head_lr", "weight_decay", "warmup", "max_steps", "seed",
            "held_out", "bf16")


def run_settings(args: argparse.Namespace) -> dict:
    s = {k: getattr(args, k) for k in SETTINGS}
    s["format"] = FORMAT
    return s


def prepare_output(out: Path, settings: dict) -> str:
    """'new', 'resume' or 'done'. A folder that is not a start-building run's, or one asked other
    settings, is refused (nothing in it is touched)."""
    if out.exists() and not out.is_dir():
        raise StartError(f"--output_dir '{out}' is a file; name a folder")
    if not out.exists() or not any(out.iterdir()):
        return "new"
    saved = out / "settings.json"
    if not saved.is_file():
        raise StartError(f"--output_dir '{out}' is not empty and holds no settings.json of a start-building run; "
                         f"name a new folder")
    before = json.loads(saved.read_text(encoding="utf-8"))
    changed = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
    if changed:
        diffs = ", ".join(f"--{k} {before.get(k)!r} -> {settings.get(k)!r}" for k in changed[:6])
        raise StartError(f"--output_dir '{out}' was started with other settings ({diffs}); rerun with the same "
                         f"options to continue it, or name a new folder")
    if (out / "results.json").is_file() and (out / "model" / "config.json").is_file():
        return "done"
    return "resume"


def evaluate_held_out(model: Any, tokenizer: Any, feats: Sequence[dict], autocast: Any) -> dict:
    """Span accuracy (argmax start and end both right) on the held-out answerable features,
    answerability accuracy on all of them, and the mean loss."""
    import torch

    from tasks.qa.task import qa_supervised_loss
    from tasks.qa.data import collate_features

    model.eval()
    span_right = span_n = ans_right = 0
    losses = []
    order = sorted(range(len(feats)), key=lambda i: len(feats[i]["input_ids"]))
    with torch.no_grad():
        for a in range(0, len(order), 64):
            batch = collate_features(tokenizer, [feats[i] for i in order[a:a + 64]], with_labels=True)
            with autocast():
                out = model(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch})
            sup = qa_supervised_loss(out.start_logits, out.end_logits, out.answerability_logits, batch["span_mask"],
                                     batch["start_position"], batch["end_position"], batch["answerable"], 1.0, 1.0)
            losses += sup.per_example_loss.tolist()
            has = batch["answerable"].bool()
            span_right += int(sup.correct[has].sum())
            span_n += int(has.sum())
            ans_right += int((out.answerability_logits.float().argmax(-1) == batch["answerable"]).sum())
    model.train()
    return {"held_out/span_accuracy": 100.0 * span_right / max(1, span_n),
            "held_out/answerability_accuracy": 100.0 * ans_right / max(1, len(feats)),
            "held_out/loss": float(np.mean(losses)) if losses else float("nan")}


@dataclass
class _StopState:
    stop_signal: int = 0  # set by uda.signals.stop_requests


def _save_checkpoint(out: Path, step: int, model: Any, optimizer: Any, scheduler: Any, train_seconds: float) -> None:
    import torch

    from uda.checkpoint import rng_state

    tmp = out / "checkpoint.pt.tmp"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "rng": rng_state(), "train_seconds": train_seconds}, tmp)
    os.replace(tmp, out / "checkpoint.pt")


def _trim_metrics(path: Path, step: int) -> None:
    """On resume: drop the metric lines of steps after the checkpoint (the resumed run logs them again)."""
    if path.is_file():
        keep = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()
                and json.loads(ln).get("step", 0) <= step]
        path.write_text("".join(ln + "\n" for ln in keep), encoding="utf-8")


def build_start(args: argparse.Namespace, stop_at_step: Optional[int] = None) -> dict:
    """Build (or continue) the start in ``args.output_dir``; returns results.json's content.
    ``stop_at_step``: save and stop there as if interrupted (tests)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    from tasks.qa.task import qa_supervised_loss
    from tasks.qa.data import collate_features
    from tasks.qa.model import build_qa_model
    from uda.checkpoint import set_rng_state
    from uda.devices import cpu_has_native_bf16
    from uda.hub import resolve_model_path
    from uda.optim import param_groups
    from uda.signals import stop_requests
    from uda.io import atomic_write_json

    out = Path(args.output_dir).expanduser()
    settings = run_settings(args)
    state = prepare_output(out, settings)
    if state == "done":
        print(f"the start in '{out}' is already built: {out / 'model'}")
        return json.loads((out / "results.json").read_text(encoding="utf-8"))
    if args.threads:
        torch.set_num_threads(args.threads)
    paras, info = collect_paragraphs(args)
    held_idx = {i for i in range(len(paras)) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1} or (
        {len(paras) - 1} if len(paras) > 1 else set())
    train_paras = [p for i, p in enumerate(paras) if i not in held_idx]
    held_paras = [paras[i] for i in sorted(held_idx)]
    gen = dict(per_paragraph=args.per_paragraph, recurring_weight=args.recurring, cloze_weight=args.cloze,
               unanswerable=args.unanswerable)
    train_ex = synthetic_examples(train_paras, seed=args.seed, **gen)
    held_ex = synthetic_examples(held_paras, seed=args.seed + 1, **gen)
    digest = hashlib.sha256("\n".join(e["id"] + "\t" + e["question"] + "\t" + e["context"] for e in train_ex)
                            .encode("utf-8")).hexdigest()

    model_path = resolve_model_path(args.model)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "right"
    torch.manual_seed(args.seed)
    model = build_qa_model(model_path)
    add_question_token(tokenizer, model)
    feats = start_features(tokenizer, train_ex, args)
    held = start_features(tokenizer, held_ex, args)
    if args.held_out and len(held) > args.held_out:
        keep = np.sort(np.random.default_rng([args.seed, 9]).choice(len(held), args.held_out, replace=False))
        held = [held[int(i)] for i in keep]
    counts = {"examples": kind_counts(train_ex), "features": kind_counts(feats),
              "held_out_examples": kind_counts(held_ex), "held_out_features": kind_counts(held),
              "paragraphs": {"train": len(train_paras), "held_out": len(held_paras)},
              "unanswerable_share": round(sum(e["is_impossible"] for e in train_ex) / max(1, len(train_ex)), 4),
              "examples_sha256": digest}
    if state == "new":
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "settings.json", settings)
        atomic_write_json(out / "synthetic_counts.json", counts)
        atomic_write_json(out / "data_info.json", info)
        with (out / "synthetic_sample.jsonl").open("w", encoding="utf-8") as f:
            for e in train_ex[:100]:
                f.write(json.dumps(e, ensure_ascii=False) + "\n")
    else:
        before = json.loads((out / "synthetic_counts.json").read_text(encoding="utf-8"))
        if before.get("examples_sha256") != digest:
            raise StartError(f"the texts changed since '{out}' was started (the synthetic examples differ); rerun "
                             f"with the same texts to continue it, or name a new folder")
    plan = BatchPlan([len(f["input_ids"]) for f in feats], args.batch_size, args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).train()
    optimizer = torch.optim.AdamW(param_groups(model, args.weight_decay, args.lr, args.head_lr), lr=args.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(args.warmup * args.max_steps), args.max_steps)
    step, train_seconds = 0, 0.0
    if state == "resume" and (out / "checkpoint.pt").is_file():
        ck = torch.load(out / "checkpoint.pt", map_location=device, weights_only=False)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        set_rng_state(ck["rng"])
        step, train_seconds = ck["step"], ck["train_seconds"]
        print(f"continuing '{out}' from step {step}")
    else:
        torch.manual_seed(args.seed + 1)  # dropout draws from here on
    _trim_metrics(out / "metrics.jsonl", step)
    use_bf16 = args.bf16 == "on" or (args.bf16 == "auto" and (
        torch.cuda.is_bf16_supported() if device.type == "cuda" else cpu_has_native_bf16()))

    def autocast() -> Any:
        return torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()

    writer = None
    if args.report_to == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out / "tb"), purge_step=step)

    def log(at: int, scalars: dict) -> None:
        with (out / "metrics.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": at, **{k: round(v, 5) for k, v in scalars.items()}}) + "\n")
        if writer is not None:
            for k, v in scalars.items():
                writer.add_scalar(k, v, at)

    t0, last_save, cpu0 = time.monotonic(), time.monotonic(), time.process_time()
    seconds_before = train_seconds
    bar = tqdm(total=args.max_steps, initial=step, desc="QA start", mininterval=5, disable=not args.progress)
    recent: list[float] = []
    stopped = 0
    stop = _StopState()
    with stop_requests(stop):  # Ctrl-C / SIGTERM: save after the step under way and stop
        while step < args.max_steps:
            batch = collate_features(tokenizer, [feats[i] for i in plan(step)], with_labels=True)
            batch = {k: v.to(device) for k, v in batch.items()}
            with autocast():
                o = model(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch})
            sup = qa_supervised_loss(o.start_logits, o.end_logits, o.answerability_logits, batch["span_mask"],
                                     batch["start_position"], batch["end_position"], batch["answerable"], 1.0, 1.0)
            loss = sup.per_example_loss.mean()
            if not torch.isfinite(loss):
                raise StartError(f"the loss is {float(loss)} at step {step + 1}; lower --lr (the last checkpoint "
                                 f"is kept)")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
            recent.append(float(loss.detach()))
            if step % args.log_every == 0:
                log(step, {"train/loss": float(np.mean(recent)), "train/lr": scheduler.get_last_lr()[0]})
                bar.set_postfix(loss=f"{np.mean(recent):.3f}")
                recent = []
            if step % args.eval_every == 0 or step == args.max_steps:
                metrics = evaluate_held_out(model, tokenizer, held, autocast)
                log(step, metrics)
                bar.write(f"step {step}: held-out span accuracy {metrics['held_out/span_accuracy']:.1f}%, "
                          f"answerability {metrics['held_out/answerability_accuracy']:.1f}%")
            train_seconds = seconds_before + time.monotonic() - t0
            if step == stop_at_step or stop.stop_signal:
                stopped = stop.stop_signal or -1
                break
            if step < args.max_steps and time.monotonic() - last_save >= 60 * args.checkpoint_minutes:
                _save_checkpoint(out, step, model, optimizer, scheduler, train_seconds)
                last_save = time.monotonic()
    bar.close()
    if stopped:
        _save_checkpoint(out, step, model, optimizer, scheduler, train_seconds)
        if writer is not None:
            writer.close()
        print(f"stopped at step {step}; checkpoint saved in '{out}'. Run the same command to continue.")
        if stopped > 0:
            raise SystemExit(128 + stopped)
        return {"stopped_at_step": step}
    model.eval()
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    final = evaluate_held_out(model, tokenizer, held, autocast)
    results = {"steps": step, "train_seconds": round(train_seconds, 1),
               "cpu_seconds_this_session": round(time.process_time() - cpu0, 1),
               "examples_seen": step * args.batch_size, "features": len(feats), "epochs": round(step / plan.per_epoch, 3),
               "bf16": use_bf16, "device": str(device), "threads": torch.get_num_threads(),
               **{k.replace("held_out/", "held_out_"): round(v, 4) for k, v in final.items()},
               "model": str((out / "model").resolve())}
    atomic_write_json(out / "results.json", results)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    if writer is not None:
        writer.close()
    print(f"QA start saved in {out / 'model'} (held-out span accuracy {final['held_out/span_accuracy']:.1f}%, "
          f"{train_seconds / 60:.0f} min); train from it with --model.name_or_path {out / 'model'}")
    return results


# ----------------------------------------------------------------------------- command line

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="uda-qa-start",
        description="Build a QA-shaped start from unlabelled text: a SQuAD 2.0 reader (span and answerability "
                    "heads) trained on synthetic questions (recurring spans, cloze questions, unanswerable ones), "
                    "saved as a Hugging Face checkpoint for --task squad_v2 / passages --model.name_or_path.")
    a = p.add_argument
    a("--output_dir", required=True, help="Run folder (checkpoint, logs; the start in OUTPUT_DIR/model). The same "
      "command continues an interrupted run.")
    a("--model", default="minilm", help="Encoder to start from: a local folder, a hub id, or minilm (the offline "
      "all-MiniLM-L6-v2 package). Default: minilm.")
    a("--squad", help="A SQuAD-format json file: the paragraphs of its articles that are neither test nor dev in the "
      "squad_v2 task's split are used (see --squad_paragraphs), and --texts are checked against its test and dev "
      "articles.")
    a("--squad_paragraphs", type=_bool, default=True, help="Build questions from --squad's non-test, non-dev "
      "paragraphs (true, the default) or only hold its test/dev articles out (false).")
    a("--test_articles", type=int, default=10, help="Test articles of the split (as --qa.test_articles). Default: 10.")
    a("--dev_articles", type=int, default=3, help="Dev articles of the split (as --qa.dev_articles). Default: 3.")
    a("--texts", action="append", help="More text: a .txt (paragraphs separated by blank lines), .json or "
      ".jsonl(.gz) file, or a folder of them; repeat for several. Long texts are cut into paragraphs.")
    a("--text_column", default="text", help="Field of a json record that holds the text. Default: text.")
    a("--max_texts", type=int, help="Read at most this many texts from each --texts source.")
    a("--chunk_words", type=int, default=150, help="Longest paragraph cut from a --texts text, in words. Default: 150.")
    a("--per_paragraph", type=int, default=16, help="Synthetic questions per paragraph, at most. Default: 16.")
    a("--recurring", type=float, default=0.5, help="Weight of recurring-span questions. Default: 0.5.")
    a("--cloze", type=float, default=0.5, help="Weight of cloze questions. Default: 0.5.")
    a("--unanswerable", type=float, default=0.33, help="Share of unanswerable questions (SQuAD 2.0's training "
      "set: 0.33). Default: 0.33.")
    a("--max_length", type=int, default=256, help="Tokens per window. Default: 256.")
    a("--doc_stride", type=int, default=128, help="Context tokens shared by consecutive windows. Default: 128.")
    a("--max_question_length", type=int, default=64, help="Questions are cut to this many tokens. Default: 64.")
    a("--batch_size", type=int, default=16, help="Default: 16.")
    a("--lr", type=float, default=1e-4, help="Encoder learning rate. Default: 1e-4.")
    a("--head_lr", type=float, default=1e-3, help="Span and answerability heads' learning rate. Default: 1e-3.")
    a("--weight_decay", type=float, default=0.01, help="Default: 0.01.")
    a("--warmup", type=float, default=0.06, help="Share of the steps with a linear warm-up. Default: 0.06.")
    a("--max_steps", type=int, default=3000, help="Training steps. Default: 3000.")
    a("--seed", type=int, default=1, help="Default: 1.")
    a("--held_out", type=int, default=400, help="Held-out synthetic features evaluated (from paragraphs kept out "
      "of training). Default: 400.")
    a("--eval_every", type=int, default=250, help="Held-out evaluation every this many steps. Default: 250.")
    a("--log_every", type=int, default=25, help="Training loss logged every this many steps. Default: 25.")
    a("--checkpoint_minutes", type=float, default=10.0, help="Save a checkpoint every this many minutes. Default: 10.")
    a("--bf16", choices=("auto", "on", "off"), default="auto", help="bf16 autocast: auto uses it where the device "
      "runs it natively. Default: auto.")
    a("--threads", type=int, default=0, help="torch CPU threads (0: torch's default).")
    a("--report_to", choices=("tensorboard", "none"), default="tensorboard", help="Default: tensorboard.")
    a("--progress", type=_bool, default=True, help="Show a progress bar. Default: true.")
    return p


def _bool(v: str) -> bool:
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {v!r}")


def check_args(args: argparse.Namespace) -> None:
    for name in ("per_paragraph", "max_length", "batch_size", "max_steps", "eval_every", "log_every", "chunk_words"):
        if getattr(args, name) < 1:
            raise StartError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 0 <= args.unanswerable < 1:
        raise StartError(f"--unanswerable must be in [0, 1), got {args.unanswerable}")
    if min(args.recurring, args.cloze) < 0 or args.recurring + args.cloze <= 0:
        raise StartError("--recurring and --cloze must be >= 0 and not both 0")
    if args.doc_stride >= args.max_length - args.max_question_length - 3:
        raise StartError(f"--doc_stride ({args.doc_stride}) must be below --max_length - --max_question_length - 3 "
                         f"({args.max_length - args.max_question_length - 3})")
    if not 0 <= args.warmup < 1:
        raise StartError(f"--warmup must be in [0, 1), got {args.warmup}")
    if args.squad and not Path(args.squad).expanduser().exists():
        raise StartError(f"--squad '{args.squad}' does not exist; give the SQuAD json file (e.g. dev-v2.0.json)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from uda.data import DataError

    args = parser().parse_args(argv)
    try:
        check_args(args)
        build_start(args)
    except (StartError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
