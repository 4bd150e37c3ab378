"""A catalogue of bad inputs: each is refused with one line that names the problem, a non-zero exit, no
traceback, and no file written or changed anywhere (data, caches, runs, results, reports)."""

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from bench.engine.run import train
from bench.engine.spec import RunSpec
from bench.errors import BenchError
from tests.conftest import run_cli_here

FAST = {"emsize": 16, "nhid": 64, "bptt": 16, "batch_size": 4, "max_steps": 6, "eval_every": 3,
        "checkpoint_every": 3, "eval_streams": 4, "eval_chunk": 32, "eval_max_tokens": 300}
TRAIN = ["train", "--dataset", "toy", "--data-dir", "{data}", "--quiet", "--out", "{new}"]
for _key, _value in FAST.items():
    TRAIN += ["--set", f"{_key}={_value}"]
TRANSFORMER = ["train", "--model", "transformer", "--dataset", "toy", "--data-dir", "{data}", "--quiet", "--out",
               "{new}", "--set", "d_model=16", "--set", "nheads=2", "--set", "max_steps=4"]
LSTM = ["train", "--model", "lstm", "--dataset", "toy", "--data-dir", "{data}", "--quiet", "--out", "{new}",
        "--set", "max_steps=4"]

MATRIX = """
[matrix]
name = "toy"
[axes]
model = ["lstm"]
tokenizer = ["byte"]
dataset = ["toy"]
seed = [0]
[budget]
chars = 2_000
[context]
chars = 32
[shared]
preset = "tiny"
batch_size = 4
eval_every = 5
eval_max_tokens = 300
eval_streams = 4
eval_chunk = 32
emsize = 16
nhid = 16
"""

FLOPS = 'name = "toy"\nmatch = "flops"'  # equal training FLOPs: [budget] flops

CONFIGS = {
    "seed-float": MATRIX.replace("seed = [0]", "seed = [1.5]"),
    "seed-text": MATRIX.replace("seed = [0]", 'seed = ["a"]'),
    "seed-empty": MATRIX.replace("seed = [0]", "seed = []"),
    "seed-negative": MATRIX.replace("seed = [0]", "seed = [-2]"),
    "axis-table": MATRIX.replace('model = ["lstm"]', "model = [{name = 'lstm'}]"),
    "model-unknown": MATRIX.replace('model = ["lstm"]', 'model = ["no-such-model"]'),
    "models-unknown": MATRIX + "[models.no-such-model]\nemsize = 8\n",
    "models-not-table": MATRIX.replace("[shared]", "[models]\nlstm = 3\n[shared]"),
    "tokenizers-bad": MATRIX + '[tokenizers."bpe"]\nlr = 0.1\n',
    "budget-key": MATRIX.replace("chars = 2_000", "chars = 2_000\nhours = 3"),
    "match-bad": MATRIX.replace("[axes]", "[axes]\nmatch = ['bytes']"),
    "eval-chunk": MATRIX.replace('model = ["lstm"]', 'model = ["transformer"]').replace("emsize = 16\nnhid = 16", "")
    + "[models.transformer]\neval_chunk = 999\n",
    "both-contexts": MATRIX.replace("nhid = 16", "nhid = 16\nbptt = 20"),
    "dropout": MATRIX.replace("nhid = 16", "nhid = 16\ndropout = 1.0"),
    "lr-nan": MATRIX.replace("nhid = 16", "nhid = 16\nlr = nan"),
    "no-budget": MATRIX.replace("chars = 2_000", "epochs_x = 1").replace("[budget]\nepochs_x = 1\n", ""),
    "section": MATRIX + "[oops]\nx = 1\n",
    "not-toml": "[axes\nmodel = ",
    "vocab": MATRIX.replace('tokenizer = ["byte"]', 'tokenizer = ["bpe:10000000"]'),
    "no-corpus": MATRIX.replace('dataset = ["toy"]', 'dataset = ["nope"]'),
    "flops-tiny": MATRIX.replace('name = "toy"', FLOPS).replace("chars = 2_000", "flops = 1"),
    "flops-huge": MATRIX.replace('name = "toy"', FLOPS).replace("chars = 2_000", "flops = 1e30"),
    # found by a hostile tester
    "budget-in-shared": MATRIX.replace("nhid = 16", "nhid = 16\nmax_steps = 3"),
    "init-from-nowhere": MATRIX.replace("nhid = 16", 'nhid = 16\ninit_from = "/nonexistent"'),
    "value-twice": MATRIX.replace('seed = [0]', 'seed = [0]\nemsize = ["16", 16]'),
    "number-twice": MATRIX.replace('seed = [0]', 'seed = [0]\nemsize = [16.0, 16]'),
    "spaces": MATRIX.replace('tokenizer = ["byte"]', 'tokenizer = ["byte", " byte "]'),
    "match-list": MATRIX.replace('name = "toy"', 'name = "toy"\nmatch = ["chars"]'),
    "data-dir-number": MATRIX.replace('name = "toy"', 'name = "toy"\ndata_dir = 3'),
    "matrix-key": MATRIX.replace('name = "toy"', 'name = "toy"\nnmae = "x"'),
    "include-part": MATRIX + '[[include]]\nmodel = "lstm"\n',
    "pretrained-number": MATRIX + '[[pretrained]]\nmodel = "../fakehf"\ndataset = 3\n',
    "pretrained-twice": MATRIX + '[[pretrained]]\nmodel = "../fakehf"\ndataset = ["toy", "toy"]\n',
    "pretrained-trust": MATRIX + '[[pretrained]]\nmodel = "../fakehf"\ntrust_remote_code = "yes"\n',
    "phases-alike": MATRIX + '[[phases]]\nname = "a"\n[[phases]]\nname = "a"\ninit_from = "previous"\n',
    "phase-typo": MATRIX + '[[phases]]\nname = "a"\n[[phases]]\nname = "b"\ninit_from = "previouss"\n',
    "corpus-path-number": MATRIX.replace('dataset = ["toy"]', 'dataset = ["c2"]')
    + '[corpora.c2]\ntrain = 3\nvalid = "v.txt"\ntest = "s.txt"\n',
    "prefix-too-long": MATRIX.replace('dataset = ["toy"]', 'dataset = ["c6"]')
    + '[corpora.c6]\nprefix_of = "toy"\ntrain_bytes = 10_000_000\nvalid_bytes = 100\ntest_bytes = 100\n',
    "name-empty": MATRIX.replace('name = "toy"', 'name = ""'),
    "name-number": MATRIX.replace('name = "toy"', "name = 123"),
    "unused-table": MATRIX + '[tokenizers."bpe:500"]\nnhid = 32\n',
    "model-preset": MATRIX + '[models.lstm]\npreset = "small"\n',
    "cuda-graphs-jitter": MATRIX.replace("nhid = 16", "nhid = 16\nseq_jitter = true\ncuda_graphs = true"),
}

SPLIT_FILES = ["--train", "{text}", "--valid", "{text}", "--test", "{text}", "--data-dir", "{data}"]
ADD_MINE = ["data", "add", "mine", "--valid", "{text}", "--test", "{text}", "--data-dir", "{data}"]
FETCH_VALID = ["data", "fetch", "wikitext-2", "--splits", "valid", "--allow-unverified", "--data-dir",
               "{sandbox}/fetched"]
STATS = ["tokenize", "stats", "--dataset", "toy", "--data-dir", "{data}", "--splits", "valid"]


def report_of(results: str) -> list[str]:
    """bench report of a broken results folder, into a folder of its own (never the checkout's reports/)."""
    return ["report", "{" + results + "}", "--out", "{new}"]


CASES = [
    # training settings, refused when the run is resolved
    ("dropout above 1", TRAIN + ["--set", "dropout=1.5"], "dropout is a dropout rate"),
    ("dropout negative", TRAIN + ["--set", "dropouth=-0.1"], "dropouth is a dropout rate"),
    ("dropout of 1", TRAIN + ["--set", "dropouti=1"], "in [0, 1)"),
    ("zero emsize", TRAIN + ["--set", "emsize=0"], "emsize must be at least 1"),
    ("negative emsize", TRAIN + ["--set", "emsize=-5"], "emsize must be at least 1"),
    ("zero layers", TRAIN + ["--set", "nlayers=0"], "nlayers must be at least 1"),
    ("zero memory", TRAIN + ["--set", "max_memory=0"], "max_memory must be at least 1"),
    ("zero heads", TRANSFORMER + ["--set", "nheads=0"], "nheads must be at least 1"),
    ("zero d_model", TRANSFORMER + ["--set", "d_model=0"], "d_model must be at least 1"),
    ("lstm weight drop 1", LSTM + ["--set", "wdrop=1"], "wdrop is a dropout rate"),
    ("lstm init range 0", LSTM + ["--set", "init_range=0"], "init_range must be positive"),
    ("NaN lr", TRAIN + ["--set", "lr=nan"], "lr must be a finite number"),
    ("infinite lr", TRAIN + ["--set", "lr=inf"], "lr must be a finite number"),
    ("negative lr", TRAIN + ["--set", "lr=-1"], "lr must be positive"),
    ("negative clip", TRAIN + ["--set", "clip=-1"], "clip must not be negative"),
    ("NaN clip", TRAIN + ["--set", "clip=nan"], "clip must be a finite number"),
    ("NaN minutes", TRAIN + ["--set", "max_minutes=nan"], "max_minutes must be a finite number"),
    ("negative minutes", TRAIN + ["--set", "max_minutes=-3"], "max_minutes must be positive"),
    ("beta2 of 1", TRAIN + ["--set", "beta2=1.0"], "beta2 must be in [0, 1)"),
    ("negative weight decay", TRAIN + ["--set", "weight_decay=-1"], "weight_decay must not be negative"),
    ("zero eval streams", TRAIN + ["--set", "eval_streams=0"], "eval_streams must be at least 1"),
    ("final splits", TRAIN + ["--set", "final_eval_splits=train"], "final_eval_splits must list valid"),
    ("negative seed", TRAIN + ["--seed", "-1"], "seed must be an integer"),
    ("unreachable vocabulary", TRAIN + ["--tokenizer", "bpe:10000000"], "supports only"),
    ("too small vocabulary", TRAIN + ["--tokenizer", "bpe:12"], "at least 257"),
    ("both contexts", TRAIN + ["--set", "context_chars=128"], "both bptt (tokens) and context_chars"),
    ("stride beyond window", TRANSFORMER + ["--set", "eval_chunk=999"], "eval_chunk (999) is longer"),
    ("batch beyond corpus", TRAIN + ["--set", "batch_size=100000"], "too short for batch_size 100000"),
    ("no budget", TRAIN + ["--set", "max_steps=none"], "no training budget"),
    ("a budget under one step", TRAIN + ["--set", "max_steps=none", "--set", "max_train_chars=3"],
     "less than one step"),
    ("a budget beyond the horizon", TRAIN + ["--set", "max_steps=none", "--set", "max_train_flops=1e30"],
     "beyond 10,000,000"),
    ("unknown setting", TRAIN + ["--set", "bogus=1"], "unknown setting 'bogus'"),
    ("not a number", TRAIN + ["--set", "max_steps=lots"], "bad value 'lots' for max_steps"),
    ("not a choice", TRAIN + ["--set", "attention=everywhere"], "allowed: second-last, all, none"),
    ("not a LAMB implementation", TRAIN + ["--set", "lamb_impl=fused"], "allowed: auto, foreach, loop"),
    ("CUDA graphs on a CPU", TRAIN + ["--set", "device=cpu", "--set", "cuda_graphs=true"],
     "cuda_graphs needs a CUDA device; this run's device is cpu"),
    ("CUDA graphs of segments of every length", TRAIN + ["--set", "seq_jitter=true", "--set", "cuda_graphs=true"],
     "seq_jitter draws a new segment length each step"),
    ("CUDA graphs measured on a CPU", ["speed", "--steps", "1", "--set", "device=cpu", "--set", "cuda_graphs=true"],
     "cuda_graphs needs a CUDA device"),
    ("Boom width", TRAIN + ["--set", "nhid=100"], "multiple of emsize"),
    ("unknown device", TRAIN + ["--set", "device=tpu"], "bad device 'tpu'"),
    ("absent GPU", TRAIN + ["--set", "device=cuda"], "no CUDA GPU is available"),
    ("set without value", TRAIN + ["--set", "lr"], "KEY=VALUE"),
    ("unknown model", TRAIN + ["--model", "no-such-model"], "unknown model 'no-such-model'"),
    ("unknown preset", TRAIN + ["--preset", "huge"], "unknown preset 'huge'"),
    ("unknown scheme", TRAIN + ["--tokenizer", "words"], "unknown tokenization scheme"),
    ("unknown corpus", TRAIN + ["--dataset", "nope"], "unknown corpus 'nope'"),
    # a misspelt name: the registry's nearest names
    ("a misspelt model", TRAIN + ["--model", "lsmt"], "did you mean 'lstm'?"),
    ("a misspelt preset", TRAIN + ["--preset", "tinyy"], "did you mean 'tiny'?"),
    ("a misspelt scheme", TRAIN + ["--tokenizer", "bytes"], "did you mean 'byte'?"),
    ("a misspelt corpus", TRAIN + ["--dataset", "wikitext2"], "did you mean 'wikitext-2'"),
    ("unfetched corpus", TRAIN + ["--dataset", "wikitext-103"], "bench data fetch wikitext-103"),
    ("init from nowhere", TRAIN + ["--set", "init_from={sandbox}/nowhere"], "no checkpoint at"),
    ("init from another model", TRAIN + ["--set", "init_from={lstm_run}"], "holds a lstm model"),
    ("init from other sizes", TRAIN + ["--set", "init_from={run}", "--set", "emsize=32"], "do not fit this model"),
    ("out is a file", TRAIN + ["--out", "{file}"], "is a file, not a folder"),
    ("out of another run", TRAIN + ["--out", "{run}", "--set", "max_steps=5"], "holds another run"),
    ("data folder is a file", TRAIN + ["--data-dir", "{file}"], "data folder"),
    # using a trained model
    ("negative chunk", ["eval", "{run}", "--chunk", "-1"], "Invalid value for '--chunk'"),
    ("zero chunk", ["eval", "{run}", "--chunk", "0"], "Invalid value for '--chunk'"),
    ("chunk beyond the window", ["eval", "{transformer_run}", "--chunk", "65"], "the evaluation chunk (65) is "
                                                                                "longer than the model's window (64)"),
    ("zero streams", ["eval", "{run}", "--streams", "0"], "Invalid value for '--streams'"),
    ("a checkpoint of an older version", ["eval", "{old_pt}"], "written by an older version"),
    ("marginal lines alone", ["eval", "{run}", "--marginal-lines", "5"], "give --marginal too"),
    ("marginal beyond its bound", ["eval", "{run}", "--marginal", "1000000000"], "beyond 4,096"),
    ("negative streams", ["eval", "{run}", "--streams", "-3"], "Invalid value for '--streams'"),
    ("more streams than tokens", ["eval", "{run}", "--streams", "100000"], "is more than the"),
    ("unknown split", ["eval", "{run}", "--split", "dev"], "--split must be train, valid or test"),
    ("dump into a missing folder", ["eval", "{run}", "--dump-token-losses", "{sandbox}/none/x.npy"],
     "does not exist"),
    ("dump onto a folder", ["eval", "{run}", "--dump-token-losses", "{sandbox}"], "is a folder"),
    ("missing checkpoint", ["eval", "{sandbox}/missing"], "no checkpoint"),
    ("garbage checkpoint", ["eval", "{garbage_pt}"], "not a readable checkpoint"),
    ("truncated checkpoint", ["eval", "{truncated_pt}"], "not a readable checkpoint"),
    ("checkpoint missing weights", ["eval", "{partial_pt}"], "do not fit this model"),
    ("negative top-k", ["sample", "{run}", "--top-k", "-5"], "Invalid value for '--top-k'"),
    ("NaN temperature", ["sample", "{run}", "--temperature", "nan"], "--temperature must be a positive"),
    ("zero temperature", ["sample", "{run}", "--temperature", "0"], "--temperature must be a positive"),
    ("no tokens", ["sample", "{run}", "--tokens", "0"], "Invalid value for '--tokens'"),
    ("a trillion tokens", ["sample", "{run}", "--tokens", "1000000000000"], "is beyond 100,000"),
    ("speed without steps", ["speed", "--steps", "0"], "Invalid value for '--steps'"),
    ("context in characters without a corpus", ["models", "describe", "lstm", "--set", "context_chars=64"],
     "give --tokenizer and --dataset"),
    # corpora
    ("empty corpus file", ["data", "add", "mine", "--train", "{empty}", "--valid", "{text}", "--test", "{text}",
                           "--data-dir", "{data}"], "is empty"),
    ("one bad corpus of two", ["data", "add", "--config", "{two_corpora}", "--data-dir", "{data}"],
     "does not exist"),
    ("folder as a corpus file", ["data", "add", "mine", "--train", "{sandbox}", "--valid", "{text}", "--test",
                                 "{text}", "--data-dir", "{data}"], "is a folder"),
    ("registry name for a user corpus", ["data", "add", "wikitext-2", "--train", "{text}", "--valid", "{text}",
                                         "--test", "{text}", "--data-dir", "{data}"], "is a registry corpus"),
    ("no split to fetch", ["data", "fetch", "wikitext-2", "--splits", ",", "--data-dir", "{sandbox}/fetched"],
     "no split to fetch"),
    ("empty file fetched", ["data", "fetch", "wikitext-2", "--splits", "valid", "--file", "valid={empty}",
                            "--allow-unverified", "--data-dir", "{sandbox}/fetched"], "is empty"),
    ("verify a corpus not fetched", ["data", "verify", "wikitext-103", "--data-dir", "{data}"],
     "nothing to verify"),
    ("verify an unknown corpus", ["data", "verify", "nope", "--data-dir", "{data}"], "unknown corpus 'nope'"),
    ("data folder is a file for a fetch", ["data", "fetch", "wikitext-2", "--data-dir", "{file}"],
     "is a file, not a folder"),
    ("empty scheme list", ["tokenize", "stats", "--dataset", "toy", "--schemes", ",", "--data-dir", "{data}"],
     "--schemes is empty"),
    ("unreachable vocabulary in stats", ["tokenize", "stats", "--dataset", "toy", "--schemes", "bpe:10000000",
                                         "--data-dir", "{data}"], "supports only"),
    # matrices
    ("config is a folder", ["run-matrix", "{sandbox}"], "is a folder"),
    ("config missing", ["run-matrix", "{sandbox}/missing.toml"], "does not exist"),
    ("zero jobs", ["run-matrix", "{cfg:seed-float}", "--jobs", "0"], "--jobs must be at least 1"),
    ("results folder is a file", ["run-matrix", "{matrix}", "--results", "{file}", "--data-dir", "{data}"],
     "is a file, not a folder"),
    ("unknown launcher", ["run-matrix", "{matrix}", "--launcher", "k8s", "--data-dir", "{data}"],
     "unknown launcher"),
    ("a partition without a cluster", ["run-matrix", "{matrix}", "--partition", "gpu", "--data-dir", "{data}",
                                       "--results", "{new}"],
     "--partition set(s) cluster jobs, but --launcher is local"),
    ("a time limit without a cluster", ["run-matrix", "{matrix}", "--time-limit", "30", "--max-parallel", "2",
                                        "--data-dir", "{data}", "--results", "{new}"],
     "--time-limit, --max-parallel set(s) cluster jobs"),
    ("zero time limit", ["run-matrix", "{matrix}", "--launcher", "slurm", "--time-limit", "0",
                         "--data-dir", "{data}"], "--time-limit must be at least 1"),
    ("a corrupt status.json", ["run-matrix", "{matrix}", "--dry-run", "--data-dir", "{data}",
                               "--results", "{corrupt_status}"], "not a readable status"),
] + [(f"matrix: {name}", ["run-matrix", f"{{cfg:{name}}}", "--dry-run", "--data-dir", "{data}"], fragment)
     for name, fragment in [
         ("seed-float", "each value must be an integer"), ("seed-text", "each value must be an integer"),
         ("seed-empty", "seed is empty"), ("seed-negative", "seed must be an integer from 0"),
         ("axis-table", "each value must be a string"), ("model-unknown", "unknown model 'no-such-model'"),
         ("models-unknown", "[models.no-such-model]: unknown model"),
         ("models-not-table", "[models.lstm] must be a table"),
         ("tokenizers-bad", "needs a vocabulary size"), ("budget-key", "unknown [budget] key(s) ['hours']"),
         ("match-bad", "unknown match rule 'bytes'"), ("eval-chunk", "eval_chunk (999) is longer"),
         ("both-contexts", "[shared] bptt is held equal by the matching rule"),
         ("dropout", "dropout is a dropout rate"),
         ("lr-nan", "lr must be a finite number"), ("no-budget", "match = chars needs [budget] chars"),
         ("section", "unknown section(s) ['oops']"), ("not-toml", "is not valid TOML"),
         ("vocab", "supports only"), ("no-corpus", "unknown corpus 'nope'"),
         ("flops-tiny", "less than one step"), ("flops-huge", "beyond 10,000,000"),
         ("budget-in-shared", "[shared] max_steps is held equal by the matching rule"),
         ("init-from-nowhere", "no checkpoint at /nonexistent"),
         ("value-twice", "emsize lists one value twice ('16' and 16)"),
         ("number-twice", "emsize lists one value twice (16.0 and 16)"),
         ("spaces", "' byte ' has spaces around it"), ("match-list", "[matrix] match must be a string"),
         ("data-dir-number", "[matrix] data_dir must be a string"),
         ("matrix-key", "unknown [matrix] key(s) ['nmae']"),
         ("include-part", "[[include]] 1 needs model, tokenizer and dataset (missing: tokenizer, dataset)"),
         ("pretrained-number", "dataset must be a name or a list of names, not 3"),
         ("pretrained-twice", "dataset lists a name twice"),
         ("pretrained-trust", "trust_remote_code must be true or false, not 'yes'"),
         ("phases-alike", "two [[phases]] are named alike"), ("phase-typo", 'init_from = "previous"'),
         ("corpus-path-number", "[corpora.c2] train must be a file path"),
         ("prefix-too-long", "train_bytes 10,000,000 is more than toy's train split"),
         ("name-empty", "[matrix] name must be a non-empty string"),
         ("name-number", "[matrix] name must be a non-empty string, not 123"),
         ("unused-table", '[tokenizers.bpe:500] matches no tokenizer of the grid'),
         ("model-preset", "a preset is chosen in [shared]"),
         ("cuda-graphs-jitter", "seq_jitter draws a new segment length each step")]] + [
    # reports and comparisons
    ("report without runs", ["report", "{sandbox}"], "holds no run of a matrix"),
    ("compare a folder that is missing", ["compare", "{sandbox}/gone", "{data}"], "gone does not exist"),
    ("compare folders that hold no runs", ["compare", "{data}", "{data}"], "give two run folders"),
    ("a data folder that is a file", ["data", "list", "--data-dir", "{file}"], "is a file, not a folder"),
    ("report of a corrupt result", ["report", "{corrupt_results}"], "is not a readable result"),
    ("report of corrupt token losses", report_of("corrupt_nll"), "token_nll.test.npy is not a readable array"),
    ("report of a run folder copied under another name", report_of("duplicated"), "are both cell"),
    ("report of a damaged cell record", report_of("corrupt_cell"), "cell.json is not a readable cell record"),
    ("report into a file", ["report", "{results}", "--out", "{file}"], "is a file, not a folder"),
    ("report into a name too long", ["report", "{results}", "--out", "{sandbox}/" + "x" * 300], "longer than 255"),
    ("results under a name too long", ["run-matrix", "{matrix}", "--data-dir", "{data}", "--results",
                                       "{sandbox}/" + "x" * 300, "--dry-run"], "longer than 255"),
    ("tokenize stats without splits", ["tokenize", "stats", "--dataset", "toy", "--data-dir", "{data}", "--schemes",
                                       "byte", "--splits", ","], "--splits is empty"),
    ("a report in an unknown metric", report_of("results") + ["--metric", "bits"], "--metric 'bits'"),
    ("config fields of an unknown model", ["config", "fields", "--model", "no-such-model"],
     "unknown model 'no-such-model'"),
    ("models list given a model", ["models", "list", "lstm"], "unexpected extra argument"),
] + [
    # found by a hostile tester: corpora
    ("a binary corpus file", ADD_MINE + ["--train", "{binary}"], "is not text"),
    ("a corpus file of blank lines", ADD_MINE + ["--train", "{blank}"], "holds no text (8 bytes of whitespace)"),
    ("a device as a corpus file", ADD_MINE + ["--train", "/dev/null"], "is not a regular file"),
    ("a corpus named like the cache", ["data", "add", "cache", *SPLIT_FILES], "a folder the toolkit keeps"),
    ("a corpus name with a space", ["data", "add", "to y", *SPLIT_FILES], "bad corpus name 'to y'"),
    ("a corpus name with a colon", ["data", "add", "a:b", *SPLIT_FILES], "bad corpus name 'a:b'"),
    ("a corpus name of other letters", ["data", "add", "ünï", *SPLIT_FILES], "use ASCII letters"),
    ("a test file that is the train file", ["data", "add", "leak", *SPLIT_FILES], "same text as the train file"),
    ("a test file inside the train file", ["data", "add", "leak", "--train", "{train_text}", "--valid", "{text}",
                                           "--test", "{train_prefix}", "--data-dir", "{data}"],
     "the test file is contained in the train file (from byte 0)"),
    ("valid equal to test", ["data", "add", "twin", "--train", "{train_text}", "--valid", "{text}", "--test", "{text}",
                             "--data-dir", "{data}"], "the valid and test files are the same text"),
    ("split files without a corpus name", ["data", "add", "--config", "{two_corpora}", "--train", "{text}",
                                           "--data-dir", "{data}"], "belong to a corpus NAME"),
    ("a fetched file of blank lines", FETCH_VALID + ["--file", "valid={blank}"], "holds no text"),
    ("a folder as a fetched file", FETCH_VALID + ["--file", "valid={sandbox}"], "is a folder"),
    ("a binary fetched file", FETCH_VALID + ["--file", "valid={binary}"], "is not text"),
    ("one split given two files", FETCH_VALID + ["--file", "valid={text}", "--file", "valid={empty}"],
     "--file valid is given twice"),
    ("a manifest with a number for a file", TRAIN + ["--data-dir", "{bad_manifest}"], "manifest.json is corrupt"),
    ("adding over a corrupt manifest", ["data", "add", "toy", "--train", "{text}", "--valid", "{text}", "--test",
                                        "{text}", "--data-dir", "{list_manifest}"], "bench data add toy"),
    ("a scheme listed twice", STATS + ["--schemes", "byte,byte"], "--schemes lists byte more than once"),
    ("a size written two ways", STATS + ["--schemes", "bpe:300,bpe:0300"], "--schemes lists bpe:300 more than once"),
    ("a split listed twice in stats", STATS + ["--schemes", "byte", "--splits", "valid,valid"], "more than once"),
    ("a split listed twice in baselines", ["baselines", "toy", "--splits", "valid,valid", "--data-dir", "{data}",
                                           "--quiet"], "each once"),
    ("sentencepiece below the text's characters", STATS + ["--dataset", "cjk", "--schemes", "sp-unigram:400"],
     "sp-unigram:400 needs N of at least 858"),
    # models, settings and runtime
    ("a setting without a value", TRAIN + ["--set", "lr="], "has no value"),
    ("a vocabulary beyond a tensor", ["models", "describe", "lstm", "--vocab-size", "99999999999999999999"],
     "beyond 2,147,483,647"),
    ("a width beyond a tensor", LSTM + ["--set", "nhid=99999999999"], "beyond 2,147,483,647"),
    ("a model beyond this machine's memory", ["models", "describe", "lstm", "--preset", "tiny", "--vocab-size",
                                              "2000000000"], "needs at least"),
    ("an MLP of width 0", TRANSFORMER + ["--set", "mlp_ratio=0.001"], "MLP of width 0"),
    ("an infinite peak", ["speed", "--steps", "1", "--peak-tflops", "inf"], "positive finite number"),
    ("a batch sweep with a zero", ["speed", "--steps", "1", "--batch-sizes", "16,0"], "--batch-sizes"),
    ("a batch sweep that is not numbers", ["speed", "--steps", "1", "--batch-sizes", "16,lots"], "--batch-sizes"),
    ("a batch sweep profiled", ["speed", "--steps", "1", "--batch-sizes", "4,8", "--profile"], "--profile"),
    ("no evaluation streams", ["speed", "--steps", "1", "--eval-streams", ","], "--eval-streams"),
    ("layers overlapped in no chunk", TRAIN + ["--set", "layer_overlap=0"], "layer_overlap must be at least 1"),
    ("a temperature too small to sample", ["sample", "{run}", "--temperature", "1e-300"], "too small to sample"),
    ("a sampling seed beyond 32 bits", ["sample", "{run}", "--seed", "99999999999999999999"], "--seed must be"),
    ("a negative sampling seed", ["sample", "{run}", "--seed", "-1"], "--seed must be"),
    ("too many threads to train", TRAIN + ["--set", "threads=100000"], "per core"),
    ("too many threads to evaluate", ["eval", "{run}", "--threads", "100000"], "per core"),
    ("too many threads for a matrix", ["run-matrix", "{matrix}", "--threads", "100000", "--dry-run", "--data-dir",
                                       "{data}", "--results", "{new}"], "per core"),
    ("a floor for a decay that never happens", TRAIN + ["--set", "min_lr_ratio=0.5"], "schedule is constant"),
    ("an empty --out", TRAIN + ["--out", ""], "--out is empty"),
    ("an empty --results", ["run-matrix", "{matrix}", "--results=", "--data-dir", "{data}"], "--results is empty"),
    ("a run folder that cannot be made", TRAIN + ["--out", "/proc/bench-run"], "/proc/bench-run"),
    # using a trained model
    ("token losses through a link", ["eval", "{run}", "--dump-token-losses", "{link}"], "is a link"),
    ("one draw per line", ["eval", "{run}", "--marginal", "1"], "at least 2 draws"),
    ("init from a run of another tokenizer", TRAIN + ["--tokenizer", "bpe:300", "--set", "init_from={run}"],
     "was trained with tokenizer byte"),
    ("a device that cannot train", TRAIN + ["--set", "device=meta"], "bad device 'meta'"),
    ("a scheme size beyond 32 bits", STATS + ["--schemes", "bpe:99999999999999999999"], "at most 2,147,483,647"),
    ("bptt beyond a training stream", LSTM + ["--set", "bptt=100000"], "longer than each of the 16 training streams"),
    # matrices, reports and pretrained models
    ("a data folder that does not exist", ["run-matrix", "{matrix}", "--dry-run", "--data-dir", "{sandbox}/nowhere",
                                           "--results", "{new}"], "the data folder"),
    ("a report of runs that all failed", report_of("all_failed"), "no run has finished (1 failed"),
    ("a report whose matrix name is a path", report_of("escape"), "is of matrix '../../escaped'"),
    ("a report of a damaged learning curve", report_of("bad_log"), "log.jsonl line 1 is not JSON"),
    ("a report of a missing learning curve", report_of("no_log"), "log.jsonl is missing"),
    ("a misspelt user corpus", TRAIN + ["--dataset", "toyy"], "user corpora in"),
    ("a file where the corpus folder goes", ["data", "fetch", "wikitext-2", "--splits", "valid", "--file",
                                             "valid={text}", "--allow-unverified", "--data-dir", "{blocked}"],
     "is in the way"),
    ("a user corpus that lost a split", TRAIN + ["--data-dir", "{lost_split}"], "add the corpus again"),
    ("a pretrained tokenizer with gaps in its ids", STATS + ["--schemes", "hf:{gap}"], "ids are not 0..N-1"),
    ("a tokenizer that makes the text one token", TRAIN + ["--tokenizer", "hf:{one_word}"],
     "as 1 token(s) (a tokenizer that maps the text to <unk>"),
    ("a file too short for enwik8's cut", ["data", "fetch", "enwik8", "--splits", "train", "--file", "train={text}",
                                           "--allow-unverified", "--data-dir", "{sandbox}/fetched"],
     "too few for this split"),
    ("a corrupt archive in the user's mirror", ["data", "fetch", "wikitext-2", "--mirror", "{bad_mirror}",
                                                "--allow-unverified", "--data-dir", "{sandbox}/fetched"],
     "replace it with the official archive"),
    ("a stand-in for a corpus there is none for", ["data", "synthesize", "wikitext-2", "--out", "{new}",
                                                   "--source", "{text}"], "no synthetic stand-in for"),
    ("a WikiText-103 stand-in from text with no article", ["data", "synthesize", "wikitext-103", "--out", "{new}",
                                                           "--source", "{text}"], "holds no WikiText article"),
    ("a stand-in of no bytes", ["data", "synthesize", "enwik8", "--bytes", "0", "--out", "{new}", "--source",
                                "{text}"], "--bytes must be from 1"),
    ("a stand-in from text without articles", ["data", "synthesize", "enwik8", "--bytes", "20000000", "--out",
                                               "{new}", "--source", "{sandbox}/missing.txt"], "no WikiText file"),
    ("a stand-in from a text of no articles", ["data", "synthesize", "enwik8", "--bytes", "20000000", "--out",
                                               "{new}", "--source", "{text}"], "holds no WikiText article"),
    ("a stand-in from a binary file", ["data", "synthesize", "wikitext-103", "--out", "{new}", "--source",
                                       "{binary}"], "is not UTF-8 text"),
    ("a stand-in from WikiText in Latin-1", ["data", "synthesize", "wikitext-103", "--out", "{new}", "--source",
                                             "{latin1}"], "is not UTF-8 text"),
    ("an enwik8 stand-in of one byte", ["data", "synthesize", "enwik8", "--bytes", "1", "--out", "{new}",
                                        "--source", "{wikitext}"], "--bytes of at least 10,000,001"),
    ("an enwik8 stand-in too small for its cut", ["data", "synthesize", "enwik8", "--bytes", "300000", "--out",
                                                  "{new}", "--source", "{wikitext}"], "--bytes of at least 10,000,001"),
    ("a corpus added into a run's folder", ["data", "add", "mine", *SPLIT_FILES[:-1], "{run}"],
     "inside another command's folder"),
    ("a corpus added inside a matrix's folder", ["data", "add", "mine", *SPLIT_FILES[:-1], "{results}/data"],
     "inside another command's folder"),
    ("a stand-in written into a matrix's folder", ["data", "synthesize", "enwik8", "--bytes", "20000000", "--out",
                                                  "{results}", "--source", "{text}"], "inside another command's"),
    ("a run's caches inside another run", TRAIN[:4] + ["{run}/data"] + TRAIN[5:], "inside another command's folder"),
    ("a report into a dangling link", ["report", "{results}", "--out", "{dangling}"], "which does not exist"),
    ("a report under a dangling link", ["report", "{results}", "--out", "{dangling}/report"], "which does not exist"),
    ("a run into a dangling link", TRAIN + ["--out", "{dangling}"], "which does not exist"),
    ("a matrix into a dangling link", ["run-matrix", "{matrix}", "--data-dir", "{data}", "--results", "{dangling}",
                                       "--quiet"], "which does not exist"),
    ("another matrix into results that lost owner.json and matrix.toml", ["run-matrix", "{renamed_matrix}",
                                                                         "--dry-run", "--data-dir", "{data}",
                                                                         "--results", "{ownerless}"],
     "cell.json record its sha256"),
    ("a report into a folder of other files", ["report", "{results}", "--out", "{sandbox}/configs"],
     "already holds other files"),
    ("a run into a folder of other files", TRAIN + ["--out", "{sandbox}/configs"], "already holds other files"),
    ("a matrix into a folder of other files", ["run-matrix", "{matrix}", "--dry-run", "--data-dir", "{data}",
                                               "--results", "{sandbox}/configs"], "already holds other files"),
    ("jobs with a cluster launcher", ["run-matrix", "{matrix}", "--launcher", "slurm", "--jobs", "2",
                                      "--data-dir", "{data}", "--results", "{new}"], "leave --jobs out"),
    ("the removed submitit-local launcher", ["run-matrix", "{matrix}", "--launcher", "submitit-local",
                                             "--data-dir", "{data}", "--results", "{new}"],
     "--jobs N runs a matrix in processes of this machine"),
    ("harness conventions on a user corpus", ["eval-hf", "{fakehf}", "--dataset", "toy", "--conventions", "lm-eval",
                                              "--data-dir", "{data}", "--out", "{new}"], "is not WikiText"),
    ("a model folder whose config is not JSON", ["eval-hf", "{badhf}", "--dataset", "toy", "--data-dir", "{data}",
                                                 "--out", "{new}"], "config.json is not valid JSON"),
    ("another file under the run's corpus name", ["eval", "{run}", "--data-dir", "{other_data}"],
     "is not the file this run recorded"),
    # bench export: a finished run, into a new folder of its own
    ("export of an unfinished run", ["export", "{unfinished_run}", "{new}"], "has not finished (no result.json)"),
    ("export of a folder that is no run", ["export", "{data}", "{new}"], "is not a run folder"),
    ("export of a run whose best.pt is lost", ["export", "{bestless_run}", "{new}"], "has no best.pt, the weights"),
    ("export into an existing folder", ["export", "{run}", "{sandbox}"], "exists; bench export writes a new folder"),
    ("export over another run", ["export", "{run}", "{lstm_run}"], "exists; bench export writes a new folder"),
    ("export into the run's own folder", ["export", "{run}", "{run}/hf"], "would be written inside another command's folder"),
    ("export into a matrix's folder", ["export", "{run}", "{results}/hf"], "would be written inside another command's"),
    ("export to a link", ["export", "{run}", "{link_out}"], "is a link"),
    ("export into a missing folder", ["export", "{run}", "{sandbox}/missing/hf"], "does not exist; create it"),
    ("export in another format", ["export", "{run}", "{new}", "--format", "onnx"], "is not a format of bench export"),
    ("export of a pretrained model's result", ["export", "{hf_result}", "{new}"], "is not a finished training run"),
    ("compare of a corrupt result", ["compare", "{results}", "{corrupt_results}"], "is not a readable result"),
    ("reproduce into the folder it checks", ["reproduce", "{run}", "--out", "{run}/again"],
     "the folder being checked"),
    ("reproduce against the same folder", ["reproduce", "{results}", "--reproduced", "{results}"],
     "--reproduced is the folder being checked"),
    ("reproduce no runs", ["reproduce", "{results}", "--runs", "0"], "--runs 0: give a number of runs"),
    ("reproduce a folder of nothing", ["reproduce", "{sandbox}"], "holds no recorded run"),
    ("compare of a result without its test text", ["compare", "{run}", "{textless_run}"],
     "has test metrics but no record of the test text"),
]


def call(argv: list[str]) -> tuple[int, str, str]:
    """The CLI in this process: exit code, stdout, stderr (an escaping exception fails the test)."""
    done = run_cli_here(*argv)
    return done.returncode, done.stdout, done.stderr


def files_under(root: Path) -> dict:
    return {p: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, make_toy_corpus):
    root = tmp_path_factory.mktemp("bad")
    make_toy_corpus(root)
    paths = {split: root / f"{split}.txt" for split in ("train", "valid", "test")}
    places = {"sandbox": root, "data": root / "data", "new": root / "new-run", "text": paths["valid"],
              "file": root / "a-file", "empty": root / "empty.txt", "run": root / "run", "lstm_run": root / "lstm",
              "matrix": root / "matrix.toml", "results": root / "results"}
    places["file"].write_text("not a folder\n")
    places["empty"].write_text("")
    places["binary"], places["blank"] = root / "binary.bin", root / "blank.txt"
    places["binary"].write_bytes(bytes(range(256)) * 20)
    places["blank"].write_text("\n" * 8)
    places["wikitext"], places["latin1"] = root / "wiki.tokens", root / "latin1.tokens"
    places["wikitext"].write_text(" = Zürich = \n \n Zürich is a city in Switzerland . \n")
    places["latin1"].write_bytes(places["wikitext"].read_text().encode("latin-1"))
    places["train_text"], places["train_prefix"] = paths["train"], root / "prefix.txt"
    places["train_prefix"].write_text(paths["train"].read_text()[:2000])
    places["transformer_run"] = root / "transformer"
    for name, model in (("run", "sha-rnn"), ("lstm_run", "lstm"), ("transformer_run", "transformer")):
        overrides = FAST if model != "transformer" else {"d_model": 16, "nheads": 2, "max_steps": 3, "bptt": 64}
        train(RunSpec(model=model, preset="tiny", tokenizer="byte", dataset="toy", overrides=overrides,
                      data_dir=str(root / "data"), out_dir=str(places[name])), show_progress=False)
    _broken_checkpoints(root, places)
    places["textless_run"] = root / "textless"  # a run whose result.json lost the record of its test text
    shutil.copytree(places["run"], places["textless_run"])
    result = json.loads((places["textless_run"] / "result.json").read_text())
    del result["data"]["splits"]["test"]
    (places["textless_run"] / "result.json").write_text(json.dumps(result))
    _broken_results(root, places)
    _broken_data(root, places, paths)
    places["unfinished_run"] = root / "unfinished"  # a run stopped before its result
    shutil.copytree(places["run"], places["unfinished_run"])
    (places["unfinished_run"] / "result.json").unlink()
    places["bestless_run"] = root / "bestless"  # its result scored best.pt, since lost
    shutil.copytree(places["run"], places["bestless_run"])
    (places["bestless_run"] / "best.pt").unlink()
    places["link_out"] = root / "link-out"
    places["link_out"].symlink_to(root / "nowhere")
    places["hf_result"] = root / "hf-result"  # a result of kind pretrained, as eval-hf writes one (no weights)
    places["hf_result"].mkdir()
    result = json.loads((places["run"] / "result.json").read_text())
    source = {"model_dir": "gpt2", "model_type": "gpt2", "weights_sha256": "0" * 64, "dataset": "toy",
              "split": "test", "data_dir": None, "out_dir": None}
    (places["hf_result"] / "result.json").write_text(json.dumps(
        result | {"kind": "pretrained", "spec": None, "training": None, "pretrained": source}))
    for name, text in CONFIGS.items():
        places[f"cfg:{name}"] = root / "configs" / f"{name}.toml"
        places[f"cfg:{name}"].parent.mkdir(exist_ok=True)
        places[f"cfg:{name}"].write_text(text)
    (root / "two.toml").write_text(f'[corpora.one]\ntrain = "{paths["train"]}"\nvalid = "{paths["valid"]}"\n'
                                   f'test = "{paths["test"]}"\n[corpora.two]\ntrain = "missing.txt"\n'
                                   f'valid = "{paths["valid"]}"\ntest = "{paths["test"]}"\n')
    places["two_corpora"] = root / "two.toml"
    return {k: str(v) for k, v in places.items()}


def _broken_data(root: Path, places: dict, paths: dict) -> None:
    """Data folders with a corrupt manifest, another corpus under the run's corpus name, a link into a run."""
    from bench.data.facts import load_data_facts as facts_of

    from bench.data.user import add_user_corpus

    for name, manifest in (("bad_manifest", None), ("list_manifest", [])):
        shutil.copytree(root / "data" / "toy", root / name / "toy")
        if manifest is None:
            manifest = json.loads((root / name / "toy" / "manifest.json").read_text())
            manifest["splits"]["train"]["file"] = 5
        (root / name / "toy" / "manifest.json").write_text(json.dumps(manifest))
        places[name] = root / name
    add_user_corpus("toy", {"train": paths["train"], "valid": paths["test"], "test": paths["valid"]},
                    root / "other-data")
    places["other_data"] = root / "other-data"
    (root / "blocked").mkdir()
    (root / "blocked" / "wikitext-2").write_text("a file where the corpus folder goes")
    shutil.copytree(root / "data" / "toy", root / "lost-split" / "toy")
    (root / "lost-split" / "toy" / "valid.txt").unlink()
    places.update(blocked=root / "blocked", lost_split=root / "lost-split")
    from tokenizers import Tokenizer, models

    Tokenizer(models.WordLevel({"the": 0, "[UNK]": 70000, "a": 5}, unk_token="[UNK]")).save(str(root / "gap.json"))
    places["gap"] = root / "gap.json"
    Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")).save(str(root / "one-word.json"))
    places["one_word"] = root / "one-word.json"
    try:  # its encoded splits cached, so that the refusal below writes nothing
        facts_of("toy", f"hf:{places['one_word']}", root / "data")
    except BenchError:
        pass
    (root / "bad-mirror").mkdir()
    (root / "bad-mirror" / "wikitext-2-v1.zip").write_bytes(b"not a zip archive" * 100)
    places["bad_mirror"] = root / "bad-mirror"
    from bench.data.facts import load_data_facts

    load_data_facts("toy", "bpe:300", root / "data")  # cached: a refusal after it writes nothing
    cjk = "".join(chr(0x4E00 + (i * 7919) % 600) + ("\n" if i % 40 == 39 else "") for i in range(12_000))
    half = len(cjk) // 2  # each half has the 600 distinct characters: more than 400 pieces can hold
    (root / "cjk-valid.txt").write_text(cjk[:half])
    (root / "cjk-test.txt").write_text(cjk[half:][::-1])  # cjk repeats every 600 characters: not valid again
    # the same characters in another order (steps of 107, not 119 or -119): none of the held-out text
    (root / "cjk-train.txt").write_text("".join(chr(0x4E00 + (i * 7907) % 600) + ("\n" if i % 40 == 39 else "")
                                                for i in range(12_000)))
    add_user_corpus("cjk", {"train": root / "cjk-train.txt", "valid": root / "cjk-valid.txt",
                            "test": root / "cjk-test.txt"}, root / "data")
    (root / "link.npy").symlink_to(Path(places["run"]) / "x.npy")  # dangling, into a run's folder
    for name, config in (("fakehf", "{}"), ("badhf", "{not json")):  # model folders that are never loaded
        (root / name).mkdir()
        (root / name / "config.json").write_text(config)
        (root / name / "tokenizer.json").write_text("{}")
        places[name] = root / name
    places["link"] = root / "link.npy"
    (root / "dangling").symlink_to(root / "nowhere")  # a folder the link leads to that does not exist
    places["dangling"] = root / "dangling"


def _broken_checkpoints(root: Path, places: dict) -> None:
    best = torch.load(Path(places["run"]) / "best.pt", weights_only=True)
    (root / "garbage.pt").write_bytes(b"this is not a checkpoint" * 10)
    (root / "truncated.pt").write_bytes((Path(places["run"]) / "best.pt").read_bytes()[:5000])
    best["model"] = {k: v for k, v in best["model"].items() if "boom" not in k}
    torch.save(best, root / "partial.pt")
    old = {k: v for k, v in torch.load(Path(places["run"]) / "best.pt", weights_only=True).items() if k != "resolved"}
    torch.save(old, root / "old.pt")  # as an older version wrote it: no resolved configuration
    places.update(garbage_pt=root / "garbage.pt", truncated_pt=root / "truncated.pt", partial_pt=root / "partial.pt",
                  old_pt=root / "old.pt")


def _broken_results(root: Path, places: dict) -> None:
    from bench.study.matrix.execute import Execution, run_matrix

    Path(places["matrix"]).write_text(MATRIX)
    run_matrix(places["matrix"], places["results"], data_dir=places["data"], execution=Execution(show_progress=False))
    for name in ("corrupt", "corrupt_status", "corrupt_nll", "bad_log", "no_log", "duplicated", "corrupt_cell",
                 "all_failed", "escape"):
        shutil.copytree(places["results"], root / name)
        places[name] = root / name
    copied = next((root / "duplicated").glob("*/result.json")).parent
    shutil.copytree(copied, copied.with_name(copied.name + "-copy"))
    next((root / "corrupt_cell").glob("*/cell.json")).write_text('{"matrix": "toy", "cell"')
    failed = next((root / "all_failed").glob("*/result.json")).parent
    failed.joinpath("result.json").unlink()  # as a failed run leaves its folder
    failed.joinpath("status.json").write_text(json.dumps({"status": "failed", "error": "RuntimeError: boom"}))
    escape = next((root / "escape").glob("*/cell.json"))
    escape.write_text(json.dumps({**json.loads(escape.read_text()), "matrix": "../../escaped"}))
    next((root / "bad_log").glob("*/log.jsonl")).write_text("garbage\n{}\n")
    next((root / "no_log").glob("*/log.jsonl")).unlink()
    next((root / "corrupt_nll").glob("*/result.json")).with_name("token_nll.test.npy").write_bytes(b"\x93NUMPY garbage")
    places.update(corrupt_nll=root / "corrupt_nll")
    next((root / "corrupt").glob("*/result.json")).write_text('{"status": "done", "run_id"')
    next((root / "corrupt_status").glob("*/")).joinpath("status.json").write_text("{garbage")
    next((root / "corrupt_status").glob("*/result.json")).unlink()  # so that its status is read
    (root / "corrupt_status" / "matrix.toml").rename(root / "corrupt_status.toml")
    shutil.copytree(places["results"], root / "ownerless")  # what says whose it is, but for its runs.csv, lost
    for name in ("owner.json", "matrix.toml"):
        (root / "ownerless" / name).unlink()
    (root / "renamed.toml").write_text(MATRIX.replace('name = "toy"', 'name = "renamed"'))
    places.update(ownerless=root / "ownerless", renamed_matrix=root / "renamed.toml")
    places.update(corrupt_results=root / "corrupt", corrupt_status=root / "corrupt_status",
                  corrupt_status_matrix=root / "corrupt_status.toml")


def expand(arg: str, places: dict) -> str:
    for key, value in places.items():
        arg = arg.replace("{" + key + "}", value)
    return arg


@pytest.mark.parametrize("args,fragment", [(args, fragment) for _, args, fragment in CASES],
                         ids=[name for name, _, _ in CASES])
def test_bad_input_is_refused_in_one_line_and_writes_nothing(sandbox, args, fragment):
    argv = [expand(a, sandbox) for a in args]
    before = files_under(Path(sandbox["sandbox"]))
    code, _, err = call(argv)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("training ", "encoding "))]
    assert code != 0 and code != 130, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err
    assert files_under(Path(sandbox["sandbox"])) == before


def test_every_command_taking_input_is_in_the_catalogue():
    """A command added without a bad-input case here (or in a verdict's suite) fails this test: the catalogue
    follows the command line."""
    import signal

    import typer.main

    import cli

    app = cli.app
    if signal.getsignal(signal.SIGINT) is cli._interrupted_while_starting:  # set by the import, reset by main()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    group = typer.main.get_command(app)
    commands = [(name,) for name, command in group.commands.items() if not hasattr(command, "commands")]
    commands += [(name, sub) for name, command in group.commands.items() for sub in getattr(command, "commands", {})]
    taking_input = [c for c in commands if any(p.required or p.param_type_name == "option"
                                               for p in _command(group, c).params if p.name != "help")]
    from tests.verdict_catalogues import cases

    covered = {tuple(argv[:len(c)]) for _, argv, *_ in CASES + cases() for c in taking_input}
    assert [c for c in taking_input if c not in covered] == []
    assert {("train",), ("data", "fetch"), ("config", "fields")} <= set(taking_input)  # sub-commands included


def _command(group, path: tuple[str, ...]):
    for name in path:
        group = group.commands[name]
    return group


# --------------------------------------------------------------------------- full and read-only file systems


@contextlib.contextmanager
def mounted(target: Path, *options: str):
    """A mount for the test (root only); the test is skipped where mounting is not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", *options, str(target)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount here ({done.stderr.decode().strip()})")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_full_disk_is_one_line_and_leaves_no_run_behind(sandbox, tmp_path):
    with mounted(tmp_path / "full", "-t", "tmpfs", "-o", "size=96k", "tmpfs") as full:
        argv = [expand(a, sandbox) for a in TRAIN]
        argv[argv.index("--out") + 1] = str(full / "run")
        code, _, err = call(argv)
        assert code == 1 and err.strip().startswith("error: ") and len(err.strip().splitlines()) == 1, err
        assert "space" in err or "full" in err
        assert not any(full.iterdir())


def test_a_matrix_on_a_full_disk_is_one_line_and_leaves_nothing(sandbox, tmp_path):
    with mounted(tmp_path / "full", "-t", "tmpfs", "-o", "size=96k", "tmpfs") as full:
        code, _, err = call(["run-matrix", sandbox["matrix"], "--data-dir", sandbox["data"], "--results",
                             str(full / "results"), "--quiet"])
        lines = err.strip().splitlines()  # the plan's line, then the error
        assert code == 1 and lines[-1].startswith("error: ") and "Traceback" not in err, err
        assert "full" in lines[-1] and not any(full.iterdir())  # neither matrix.toml nor a run folder


def test_read_only_folders(sandbox, tmp_path):
    """Writing into one is one line; a finished study and tokenize stats still work there (they rewrite nothing)."""
    source = tmp_path / "copy"
    shutil.copytree(sandbox["sandbox"], source, ignore=shutil.ignore_patterns("full"), symlinks=True)
    with mounted(tmp_path / "ro", "--bind", "-o", "ro", str(source)) as ro:
        places = {**sandbox, **{k: v.replace(sandbox["sandbox"], str(ro)) for k, v in sandbox.items()}}
        code, _, err = call([expand(a, places) for a in TRAIN])
        assert code == 1 and "Read-only file system" in err and len(err.strip().splitlines()) == 1, err
        code, _, err = call(["report", places["results"], "--out", str(ro / "report")])
        assert code == 1 and "Read-only file system" in err, err
        assert ".tmp" not in err  # the user's path, not the temporary file beside it
        code, out, err = call(["run-matrix", places["matrix"], "--results", places["results"],
                               "--data-dir", places["data"]])
        assert code == 0 and "1 done" in out, err
        code, out, err = call(["tokenize", "stats", "--dataset", "toy", "--schemes", "byte", "--data-dir",
                               places["data"]])
        assert code == 0 and "byte" in out, err


def test_a_failed_atomic_write_names_the_users_file(tmp_path):
    from bench.fileio import write_text_atomic

    (tmp_path / "source").mkdir()
    with mounted(tmp_path / "ro", "--bind", "-o", "ro", str(tmp_path / "source")) as ro:
        with pytest.raises(OSError) as caught:
            write_text_atomic(ro / "marginal.test.json", "{}")
    assert caught.value.filename == str(ro / "marginal.test.json")  # not .marginal.test.json.XXXX.tmp


def test_a_full_disk_while_caching_encoded_splits_is_one_line_and_leaves_no_cache_folder(tmp_path):
    from bench.data.user import add_user_corpus
    from tests.conftest import synthetic_text

    paths = {split: tmp_path / f"{split}.txt" for split in ("train", "valid", "test")}
    for i, (split, path) in enumerate(paths.items()):
        path.write_text(synthetic_text(n_lines=3000 if split == "train" else 30, seed=i))
    train_bytes = paths["train"].stat().st_size
    with mounted(tmp_path / "full", "-t", "tmpfs", "-o", f"size={int(1.6 * train_bytes)}", "tmpfs") as full:
        add_user_corpus("big", paths, full / "data")  # the text fits, its ids (uint16, twice the bytes) do not
        before = sorted(str(p.relative_to(full)) for p in full.rglob("*"))
        argv = [expand(a, {"data": str(full / "data"), "new": str(tmp_path / "run")}) for a in TRAIN]
        code, _, err = call([a if a != "toy" else "big" for a in argv] + ["--tokenizer", "char"])
        lines = err.strip().splitlines()
        assert code == 1 and lines[-1].startswith("error: ") and "Traceback" not in err, err
        assert "disk is full" in lines[-1] and "requested" not in lines[-1], err
        left = sorted(str(p.relative_to(full)) for p in full.rglob("*") if "encoded" in str(p))
        assert left == [] and not any("encoded" in p for p in before)


def test_a_full_disk_while_adding_a_corpus_leaves_no_folder_and_the_old_corpus(sandbox, tmp_path, monkeypatch):
    import errno
    import os

    real = Path.write_bytes

    def full(self, data):  # half the bytes, then the disk is full
        real(self, data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    argv = ["data", "add", "mine", "--train", sandbox["train_text"], "--valid", sandbox["text"], "--test",
            str(Path(sandbox["sandbox"]) / "test.txt")]
    kept = tmp_path / "kept"
    assert call(argv + ["--data-dir", str(kept)])[0] == 0  # a corpus there already: the add would replace it
    before = files_under(kept)
    monkeypatch.setattr(Path, "write_bytes", full)
    for data in (tmp_path / "new" / "data", kept):
        code, _, err = call(argv[:4] + [sandbox["train_prefix"]] + argv[5:] + ["--replace", "--data-dir", str(data)])
        assert code == 1 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
        assert "disk is full" in err
    assert not (tmp_path / "new").exists() and files_under(kept) == before
