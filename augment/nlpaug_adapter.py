"""nlpaug augmenters as augmentation methods: ``nlpaug:keyboard``, ``nlpaug:char.OcrAug``, ... (docs/augmentation.md).

nlpaug (1.1.11) draws its random numbers from the global ``random`` and ``numpy.random`` states (and
``torch``'s for the masked-LM augmenters); it takes no generator. :class:`NlpaugAugmenter` makes it
follow the augmenter protocol of :mod:`augment.base` all the same:

- Each call takes exactly 16 bytes from the ``rng`` it is given (``rng.bytes(16)``), whatever the batch.
- Each text is augmented by its own nlpaug call, with the global states seeded from
  ``blake2b(those 16 bytes + the text)``: a text's output depends on the rng's state and the text
  only, not on the other texts of the batch nor on its position (a repeated text gets the same
  output). This is more than the project's own augmenters promise (they draw one stream through the
  batch, so a text's output depends on the texts before it); through :mod:`augment.pipeline`, whose
  chunk rng depends on the seed, the copy and the chunk's texts, the result depends on exactly what
  it depends on for every method, so workers, ranks and resumed runs agree.
- The previous global states of ``random``, ``numpy.random`` and (when imported) ``torch`` (CPU, and
  CUDA when initialised) are restored after every text, also when nlpaug raises: the caller's
  global RNGs are never changed. Calls are serialised by a lock, since the states are process-wide.

Compatibility work done here (nlpaug itself is not modified on disk):

- nlpaug imports ``gdown`` (and ``requests``) at package level for its download helpers; when they
  are missing, stand-ins are put in ``sys.modules`` for the import only (using a download helper
  then raises an ImportError naming the package). Nothing is ever downloaded.
- SpellingAug's dictionary lists come out of a ``set`` (order varies with ``PYTHONHASHSEED``, so
  worker processes would disagree); they are sorted after loading.
- Under transformers 5 the tokenizers have no ``_convert_token_to_id``; the masked-LM wrappers'
  ``token2id``/``id2token`` are pointed at the public ``convert_tokens_to_ids``/``convert_ids_to_tokens``.
- Model folders (``model_path`` and the like) must be local folders: a hub name raises a ValueError
  before nlpaug would try to download it. NLTK data (WordNet, the part-of-speech tagger, punkt) is
  checked before nlpaug would call ``nltk.download``; WordNet is built from Debian's ``wordnet-base``
  files (:func:`augment.word_level.build_nltk_wordnet_dir`) when NLTK has none.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import random
import re
import sys
import threading
import types
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np

__all__ = ["PREFIX", "ALIASES", "NlpaugAugmenter", "is_nlpaug_stage", "check_stage", "resolve_class",
           "stage_args", "seeded_global_rngs", "text_seed", "uses_torch", "make_stage"]

PREFIX = "nlpaug:"
SEED_FORMAT = b"uda-nlpaug-seed/1"  # part of every per-text seed: change it when the derivation changes

# short names for the common text augmenters
ALIASES: dict[str, str] = {
    "keyboard": "char.KeyboardAug",
    "ocr": "char.OcrAug",
    "random_char": "char.RandomCharAug",
    "spelling": "word.SpellingAug",
    "random_word": "word.RandomWordAug",
    "split": "word.SplitAug",
    "synonym": "word.SynonymAug",
    "antonym": "word.AntonymAug",
    "contextual": "word.ContextualWordEmbsAug",
    "word_embs": "word.WordEmbsAug",
    "tfidf": "word.TfIdfAug",
    "reserved": "word.ReservedAug",
    "back_translation": "word.BackTranslationAug",
    "random_sentence": "sentence.RandomSentAug",
    "contextual_sentence": "sentence.ContextualWordEmbsForSentenceAug",
    "summary": "sentence.AbstSummAug",
}
TEXT_MODULES = ("char", "word", "sentence")  # nlpaug.augmenter.<module>; audio/spectrogram are not text

# arguments naming a model that nlpaug would fetch from the Hugging Face hub when it is no local
# folder: (argument, its default in nlpaug)
_MODEL_ARGS: dict[str, tuple[tuple[str, Optional[str]], ...]] = {
    "ContextualWordEmbsAug": (("model_path", "bert-base-uncased"),),
    "ContextualWordEmbsForSentenceAug": (("model_path", "gpt2"),),
    "AbstSummAug": (("model_path", "t5-base"),),
    "BackTranslationAug": (("from_model_name", "facebook/wmt19-en-de"), ("to_model_name", "facebook/wmt19-de-en")),
    "LambadaAug": (("model_dir", None),),
}
_TORCH_CLASSES = frozenset(_MODEL_ARGS)
# Python packages a class needs beyond nlpaug's own (pip name when it differs from the module)
_NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    **{c: (("torch", "torch"), ("transformers", "transformers")) for c in _TORCH_CLASSES},
    "BackTranslationAug": (("torch", "torch"), ("transformers", "transformers"), ("sentencepiece", "sentencepiece")),
    "SynonymAug": (("nltk", "nltk"),),
    "AntonymAug": (("nltk", "nltk"),),
    "RandomSentAug": (("nltk", "nltk"),),
    "WordEmbsAug": (("gensim", "gensim"),),
}

_SPEC_RE = re.compile(r"^(?:(char|word|sentence)\.)?([A-Za-z_][A-Za-z0-9_]*)$")
_LOCK = threading.RLock()


# --------------------------------------------------------------------------------------------
# method names
# --------------------------------------------------------------------------------------------


def is_nlpaug_stage(stage: str) -> bool:
    return stage.startswith(PREFIX)


def check_stage(stage: str) -> str:
    """The spec of an ``nlpaug:SPEC`` stage (an alias, ``Class`` or ``module.Class``), checked for form
    only (no import); a ValueError says what is accepted."""
    spec = stage[len(PREFIX):].strip() if is_nlpaug_stage(stage) else stage
    if spec in ALIASES or _SPEC_RE.match(spec):
        return spec
    raise ValueError(f"bad nlpaug method {stage!r}: write nlpaug:NAME with NAME one of {', '.join(ALIASES)}, "
                     f"or an nlpaug text augmenter class as Class or module.Class (module: char, word, sentence), "
                     f"e.g. nlpaug:char.KeyboardAug")


def uses_torch(method: str) -> bool:
    """Whether a method (stages joined by '+') has an nlpaug stage that runs a torch model."""
    for stage in method.split("+"):
        stage = stage.strip()
        if is_nlpaug_stage(stage):
            spec = stage[len(PREFIX):].strip()
            if ALIASES.get(spec, spec).rpartition(".")[2] in _TORCH_CLASSES:
                return True
    return False


def _known_classes(nlpaug: Any) -> dict[str, type]:
    """'module.Class' -> class, for the text augmenter classes nlpaug exports."""
    base = nlpaug.Augmenter
    found = {}
    for mod in TEXT_MODULES:
        m = importlib.import_module(f"nlpaug.augmenter.{mod}")
        for name, obj in vars(m).items():
            if (inspect.isclass(obj) and issubclass(obj, base) and name.endswith("Aug")
                    and obj.__module__.startswith(f"nlpaug.augmenter.{mod}.")):
                found[f"{mod}.{name}"] = obj
    return found


def resolve_class(spec: str) -> tuple[str, type]:
    """``("char.KeyboardAug", KeyboardAug)`` for an alias, ``Class`` or ``module.Class``; a ValueError
    with suggestions when nlpaug has no such text augmenter."""
    spec = check_stage(spec)
    spec = ALIASES.get(spec, spec)
    nlpaug = import_nlpaug()
    mod, _, cls_name = spec.rpartition(".")
    for m in [mod] if mod else TEXT_MODULES:  # char first: it imports fastest
        try:
            module = importlib.import_module(f"nlpaug.augmenter.{m}")
        except ImportError as e:  # pragma: no cover (nlpaug's own imports are all optional)
            raise ImportError(f"nlpaug.augmenter.{m} does not import: {e}") from e
        obj = getattr(module, cls_name, None)
        if (inspect.isclass(obj) and issubclass(obj, nlpaug.Augmenter) and cls_name.endswith("Aug")
                and obj.__module__.startswith(f"nlpaug.augmenter.{m}.")):
            return f"{m}.{cls_name}", obj
    known = _known_classes(nlpaug)
    names = sorted(known) + sorted(ALIASES)
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.5) or difflib.get_close_matches(
        cls_name, [n.split(".")[-1] for n in known], n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"nlpaug has no text augmenter {spec!r}.{hint} Aliases: {', '.join(ALIASES)}; classes: "
                     f"{', '.join(sorted(known))}")


# --------------------------------------------------------------------------------------------
# importing nlpaug
# --------------------------------------------------------------------------------------------


def _stand_in(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__doc__ = f"stand-in for the missing package {name!r} (only nlpaug's download helpers use it)"

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):  # introspection (hasattr, import machinery) finds nothing, as usual
            raise AttributeError(attr)

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise ImportError(f"nlpaug wanted {name}.{attr}, but {name!r} is not installed (`pip install {name}`); "
                              f"nothing is downloaded by the augmenters here, pass local files instead")

        return missing

    mod.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return mod


_PATCHED = False


def import_nlpaug() -> Any:
    """``nlpaug``, imported with stand-ins for its download-only dependencies when they are missing."""
    global _PATCHED
    if "nlpaug.augmenter" in sys.modules and _PATCHED:
        return sys.modules["nlpaug"]
    with _LOCK:
        if importlib.util.find_spec("nlpaug") is None:
            raise ImportError("the nlpaug methods need the nlpaug package: `pip install --no-deps nlpaug==1.1.11` "
                              "(its other dependencies, numpy and pandas, are installed with this project)")
        added = []
        for dep in ("gdown", "requests"):  # imported at package level by nlpaug.util.file.download only
            if dep not in sys.modules and importlib.util.find_spec(dep) is None:
                sys.modules[dep] = _stand_in(dep)
                added.append(dep)
        try:
            import nlpaug  # noqa: F401
            import nlpaug.augmenter  # noqa: F401
            import nlpaug.util.file.download  # noqa: F401  (the module that wants gdown)
        finally:
            for dep in added:  # nlpaug keeps its reference; nobody else sees the stand-in
                sys.modules.pop(dep, None)
        _PATCHED = True
        return sys.modules["nlpaug"]


def _patch_language_models() -> None:
    """transformers 5 tokenizers lack the private ``_convert_token_to_id``/``_convert_id_to_token`` that
    nlpaug's masked-LM wrappers call; route them to the public methods (same result)."""
    import nlpaug.model.lang_models as nml

    def token2id(self: Any, token: str) -> int:
        return self.get_tokenizer().convert_tokens_to_ids(token)

    def id2token(self: Any, _id: int) -> str:
        return self.get_tokenizer().convert_ids_to_tokens(int(_id))

    for name in ("Bert", "DistilBert", "Roberta", "XlNet", "FmTransformers"):
        cls = getattr(nml, name, None)
        if cls is not None and not getattr(cls, "_uda_patched", False):
            cls.token2id = token2id
            cls.id2token = id2token
            cls._uda_patched = True


# --------------------------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------------------------


def _parse_json_args(value: Any) -> dict:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"option nlpaug_args must be a JSON object, e.g. '{{\"aug_char_p\": 0.1}}': {e}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"option nlpaug_args must be a JSON object (keyword arguments), got {value!r}")
    return dict(value)


def stage_args(value: Any, spec: str, all_specs: Sequence[str]) -> dict:
    """The keyword arguments of the nlpaug stage ``spec`` from the option ``nlpaug_args``: one JSON object
    for every nlpaug stage, or, when each of its keys names an nlpaug stage of the method (as written
    after ``nlpaug:``), one object per stage."""
    args = _parse_json_args(value)
    if args and set(args) <= set(all_specs) and all(isinstance(v, Mapping) for v in args.values()):
        return dict(args.get(spec, {}))
    return args


def _canonical(args: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        raise ValueError(f"nlpaug arguments must be JSON values (numbers, strings, lists, ...), got {dict(args)!r}; "
                         f"the augmenter's name and cache key are made from them") from None


def _short(value: Any) -> tuple[str, bool]:
    """A value as it appears in a name, and whether that lost information (paths: their last part)."""
    if isinstance(value, str):
        if "/" in value or os.sep in value:
            return Path(value.rstrip("/")).name or "root", True
        return value, False
    return json.dumps(value, sort_keys=True, separators=(",", ":")), False


def augmenter_name(qualified: str, args: Mapping[str, Any]) -> str:
    """``nlpaug-char.KeyboardAug-aug_char_p=0.1``; a hash of the exact arguments is added when the readable
    part leaves something out (a path shortened to its last part, or a long list)."""
    name = f"nlpaug-{qualified}"
    if not args:
        return name
    parts, lossy = [], False
    for k in sorted(args):
        v, lost = _short(args[k])
        lossy |= lost
        parts.append(f"{k}={v}")
    readable = ",".join(parts)
    if len(readable) > 60:
        readable, lossy = readable[:60], True
    name += "-" + readable
    if lossy:
        name += "-h" + hashlib.sha1(_canonical(args).encode()).hexdigest()[:8]
    return name


# --------------------------------------------------------------------------------------------
# checks before nlpaug would reach for the network
# --------------------------------------------------------------------------------------------


def _require_packages(cls_name: str) -> None:
    missing = [pip for mod, pip in _NEEDS.get(cls_name, ()) if importlib.util.find_spec(mod) is None]
    if missing:
        raise ImportError(f"nlpaug's {cls_name} needs {', '.join(missing)}: `pip install {' '.join(missing)}`")


def _require_local_models(cls_name: str, args: dict) -> None:
    for arg, default in _MODEL_ARGS.get(cls_name, ()):
        value = args.get(arg, default)
        if value is None or not Path(os.fspath(value)).expanduser().is_dir():
            raise ValueError(
                f"nlpaug's {cls_name} needs {arg}: a local folder with the model (saved with save_pretrained); "
                f"got {value!r}{' (the default)' if arg not in args else ''}, which is no folder here. Models are "
                f"never fetched from the Hugging Face hub: download one where the hub is reachable "
                f"(`huggingface-cli download NAME --local-dir DIR`) and pass the folder, e.g. "
                f"--nlpaug_args '{{\"{arg}\": \"DIR\"}}'")
        args[arg] = os.fspath(Path(os.fspath(value)).expanduser())


_TFIDF_FILES = ("tfidfaug_w2idf.txt", "tfidfaug_w2tfidf.txt")


def _require_tfidf_model(cls_name: str, args: dict) -> None:
    if cls_name != "TfIdfAug":
        return
    folder = Path(os.fspath(args.get("model_path", "."))).expanduser()
    missing = [f for f in _TFIDF_FILES if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"nlpaug's TfIdfAug needs model_path: a folder with {' and '.join(_TFIDF_FILES)}, as "
                         f"nlpaug.model.word_stats.TfIdf().train(tokenised texts) and .save(folder) write them; "
                         f"{folder} lacks {', '.join(missing)} (the project's own tf_idf method needs no files)")
    args["model_path"] = os.fspath(folder)
    import nlpaug.augmenter.word.tfidf as tfidf_module

    tfidf_module.TFIDF_MODEL = {}  # nlpaug keeps one model for every path: load this one


def _nltk_has(resource: str) -> bool:
    import nltk

    for candidate in (resource, resource + ".zip"):
        try:
            nltk.data.find(candidate)
            return True
        except LookupError:
            continue
    return False


def _nltk_missing(what: str, resource: str, cls_name: str) -> ImportError:
    return ImportError(
        f"nlpaug's {cls_name} needs NLTK's {what} data ({resource}), which is not installed and cannot be "
        f"downloaded here: run `python -m nltk.downloader {resource.split('/')[-1]}` where the internet is "
        f"reachable and put the nltk_data folder in $NLTK_DATA (or ~/nltk_data)")


def _require_nltk_data(cls_name: str, args: dict, wordnet_dir: Optional[str]) -> None:
    if cls_name in ("SynonymAug", "AntonymAug") and args.get("aug_src", "wordnet") == "wordnet":
        import nltk

        if not _nltk_has("corpora/wordnet"):
            from augment.word_level import build_nltk_wordnet_dir, find_wordnet_dir

            try:
                find_wordnet_dir(wordnet_dir)
            except FileNotFoundError as e:
                raise ImportError(f"nlpaug's {cls_name} needs WordNet: NLTK has none and {e}") from None
            cache = Path(os.environ.get("UDA_NLTK_CACHE", Path.home() / ".cache" / "uda"))
            root = build_nltk_wordnet_dir(cache, wordnet_dir)
            if not (root / "corpora" / "wordnet" / "index.sense").is_file():
                raise ImportError(f"nlpaug's {cls_name}: NLTK's WordNet reader needs index.sense, which the WordNet "
                                  f"files lack: `apt-get install wordnet-sense-index` (Debian), then delete "
                                  f"{root / 'corpora' / 'wordnet'} to rebuild it")
            if str(root) not in nltk.data.path:
                nltk.data.path.insert(0, str(root))
            try:  # a reader that failed to find the corpus before is reset
                nltk.corpus.wordnet._unload()
            except Exception:  # noqa: BLE001  (not loaded yet)
                pass
        if args.get("lang", "eng") != "eng" and not _nltk_has("corpora/omw-1.4"):
            raise _nltk_missing("Open Multilingual WordNet", "corpora/omw-1.4", cls_name)
        if not _nltk_has("taggers/averaged_perceptron_tagger_eng"):
            raise _nltk_missing("part-of-speech tagger", "taggers/averaged_perceptron_tagger_eng", cls_name)
    if cls_name == "SynonymAug" and args.get("aug_src") == "ppdb":
        if not _nltk_has("taggers/averaged_perceptron_tagger_eng"):
            raise _nltk_missing("part-of-speech tagger", "taggers/averaged_perceptron_tagger_eng", cls_name)
    if cls_name == "RandomSentAug" and not _nltk_has("tokenizers/punkt_tab"):
        raise _nltk_missing("sentence tokenizer", "tokenizers/punkt_tab", cls_name)


# --------------------------------------------------------------------------------------------
# seeding
# --------------------------------------------------------------------------------------------


def text_seed(base: bytes, text: str) -> bytes:
    """32 bytes that seed the global RNGs for one text: ``blake2b(format + base + text)``."""
    h = hashlib.blake2b(digest_size=32)
    h.update(SEED_FORMAT)
    h.update(len(base).to_bytes(2, "little"))
    h.update(base)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.digest()


@contextmanager
def seeded_global_rngs(seed: bytes) -> Iterator[None]:
    """Seed ``random``, ``numpy.random`` and (when imported) torch's generators from ``seed`` (32 bytes)
    for the block, and put back the states they had before, whatever happens in it."""
    with _LOCK:
        py_state = random.getstate()
        np_state = np.random.get_state()
        torch = sys.modules.get("torch")
        torch_state = cuda_states = None
        cuda_on = False
        if torch is not None:
            torch_state = torch.random.get_rng_state()
            cuda_on = bool(torch.cuda.is_available() and torch.cuda.is_initialized())
            if cuda_on:
                cuda_states = torch.cuda.get_rng_state_all()
        try:
            random.seed(int.from_bytes(seed[:16], "little"))
            np.random.seed(np.frombuffer(seed[:16], dtype=np.uint32))
            if torch is not None:
                s = int.from_bytes(seed[16:24], "little") & ((1 << 63) - 1)
                torch.random.default_generator.manual_seed(s)  # not torch.manual_seed: no lazy CUDA seeding
                if cuda_on:
                    torch.cuda.manual_seed_all(s)
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
            if torch is not None:
                torch.random.set_rng_state(torch_state)
                if cuda_on:
                    torch.cuda.set_rng_state_all(cuda_states)


# --------------------------------------------------------------------------------------------
# the augmenter
# --------------------------------------------------------------------------------------------


class NlpaugAugmenter:
    """One nlpaug text augmenter as a project augmenter (see the module's docstring).

    ``spec``: an alias (``keyboard``), ``Class`` or ``module.Class`` (``char.KeyboardAug``); ``args``: the
    keyword arguments of the nlpaug class (JSON values). ``wordnet_dir``: the WordNet database folder
    for SynonymAug/AntonymAug when NLTK has no WordNet of its own. The name is
    ``nlpaug-<module.Class>[-<args>]``.

    nlpaug's own text handling applies: it strips the text and, for word and character augmenters,
    re-joins its tokens with single spaces (line breaks and runs of spaces are lost; ``isn't`` may come
    back as ``isn ' t``). Empty or whitespace-only texts are returned as they are.
    """

    def __init__(self, spec: str, args: Optional[Mapping[str, Any]] = None, wordnet_dir: Optional[str] = None):
        self.qualified, cls = resolve_class(spec)
        self.spec = spec
        self.args = dict(args or {})
        _canonical(self.args)  # JSON values only
        self.name = augmenter_name(self.qualified, self.args)
        cls_name = cls.__name__
        params = inspect.signature(cls.__init__).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            unknown = sorted(set(self.args) - set(params) - {"self"})
            if unknown:
                valid = [p for p in params if p != "self"]
                raise ValueError(f"nlpaug's {cls_name} has no argument(s) {unknown}; it takes {', '.join(valid)}")
        _require_packages(cls_name)
        kwargs = dict(self.args)
        _require_local_models(cls_name, kwargs)
        _require_nltk_data(cls_name, kwargs, wordnet_dir)
        _require_tfidf_model(cls_name, kwargs)
        if cls_name in _TORCH_CLASSES:
            _patch_language_models()
        # nlpaug caches its models in module globals keyed by a folder's last name (two folders called
        # "model" would mix), or, for SpellingAug and TfIdfAug, by nothing: the first one loaded wins
        if "force_reload" in params and "force_reload" not in kwargs:
            kwargs["force_reload"] = True
        if cls_name == "SpellingAug":
            import nlpaug.augmenter.word.spelling as spelling_module

            spelling_module.SPELLING_ERROR_MODEL = {}
        if cls_name == "ContextualWordEmbsAug" and not kwargs.get("model_type"):
            kwargs["model_type"] = _masked_lm_type(kwargs["model_path"])
        with seeded_global_rngs(text_seed(b"init", self.name)):  # constructors that draw get fixed draws
            self.aug = cls(**kwargs)
        if cls_name == "SpellingAug":  # lists built from a set: their order varies with PYTHONHASHSEED
            for values in self.aug.model.dict.values():
                values.sort()
        self.stats: Counter = Counter()

    def _one(self, text: str, base: bytes) -> str:
        if not text.strip():
            return text
        with seeded_global_rngs(text_seed(base, text)):
            got = self.aug.augment(text)
        if isinstance(got, list):
            got = got[0] if got else text
        if not isinstance(got, str):
            raise TypeError(f"{self.name} returned {type(got).__name__}, not a text")
        return got

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        base = rng.bytes(16)  # the same amount of the stream whatever the batch
        out = [self._one(t, base) for t in texts]
        self.stats["nlpaug_texts"] += len(out)
        self.stats["nlpaug_unchanged"] += sum(1 for a, b in zip(texts, out) if a == b)
        return out


def _masked_lm_type(folder: str) -> str:
    """nlpaug's model_type for a masked-LM folder (bert, distilbert or roberta), from its config.json."""
    try:
        cfg = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ValueError(f"{folder}: no readable config.json; is it a model saved with save_pretrained?") from None
    kind = str(cfg.get("model_type", "")).lower()
    if kind in ("bert", "distilbert", "roberta"):
        return kind
    if kind in ("xlm-roberta", "camembert", "longformer"):
        return "roberta"
    raise ValueError(f"{folder}: model_type {kind!r} is not one nlpaug's ContextualWordEmbsAug handles "
                     f"(bert, distilbert, roberta); pass model_type in nlpaug_args to force one")


def make_stage(stage: str, options: Mapping[str, Any], all_stages: Sequence[str]) -> NlpaugAugmenter:
    """The augmenter of the stage ``nlpaug:SPEC`` of a method, with its arguments from the options."""
    spec = check_stage(stage)
    specs = [check_stage(s) for s in all_stages if is_nlpaug_stage(s)]
    return NlpaugAugmenter(spec, stage_args(options.get("nlpaug_args"), spec, specs), options.get("wordnet_dir"))
