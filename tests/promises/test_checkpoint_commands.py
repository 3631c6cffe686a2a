"""Every command runs from the last checkpoint alone, in new processes, and the commands agree with each other.

For each task its reference run (tests/promises/conftest.py: an architecture Hugging Face can hold, so the export
applies) left a copy of its last.ckpt in an empty folder, away from the run directory and its tokenizer; `test`,
`predict`, `generate` and `convert to-hf` each run on that copy in a fresh `tetraformer` process. They must agree:
the accuracy of predict's labels is test's accuracy; predict's greedy text is generate's; the export, in
transformers, gives our logits; the chat reference's export (LoRA on a Qwen2 folder) replies in transformers, with the
export's own defaults and chat template, as `generate --chat` does with the checkpoint's.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from peft import PeftModel

from tests.processes import tetraformer, write_yaml
from tests.promises.conftest import REFERENCE, REPLY_TOKENS, Reference
from tetraformer.core import GenerationConfig, generate
from tetraformer.interop import export_class
from tetraformer.training.checkpointing.loading import load_task_module

LABELLED = ("text_classification", "image_classification")
CHAT = ("instruction_tuning", "preference_tuning")  # prompts are user turns; generate takes --chat
GENERATIVE = ("language_modeling", *CHAT, "seq2seq")
GREEDY = ("--model.generation.do_sample", "false", "--model.generation.max_new_tokens", "8")
PROMPTS = ["the ", "a b"]
QUESTION = "What is the opposite of hot?"


@dataclass
class Alone:
    """A task's reference checkpoint, alone in a folder of its own, the data it was fitted on, and a new cache."""

    task: str
    ckpt: Path
    data: dict[str, str]
    cache: Path
    said: str  # what the reference's fit wrote to stderr
    made: dict[str, Any] = field(default_factory=dict)  # what a command made, kept for the tests that share it

    def exported(self) -> Path:
        """`convert to-hf` on the checkpoint alone (once): the export folder."""
        if "export" not in self.made:
            self.made["export"] = self.ckpt.parent.parent / "exported"
            tetraformer("convert", "to-hf", self.ckpt, self.made["export"], cache_dir=self.cache)
        return self.made["export"]

    def generated(self, prompt: str, *decoding: str) -> str:
        """`generate --ckpt CKPT --prompt PROMPT` (the chat task's with `--chat`) on the checkpoint alone, once per
        prompt and decoding options: what it printed."""
        key = ("generate", prompt, decoding)
        if key not in self.made:
            chat = ["--chat"] if self.task in CHAT else []
            args = ["generate", "--ckpt", self.ckpt, "--prompt", prompt, *chat, *decoding]
            self.made[key] = tetraformer(*args, cache_dir=self.cache).stdout
        return self.made[key]

    def run(self, *args: str | Path) -> Path:
        """Run a command on the copied checkpoint in a fresh process; the eval folder it wrote."""
        before = set(self.ckpt.parent.glob("eval/*"))
        tetraformer(*args, cache_dir=self.cache)
        (made,) = set(self.ckpt.parent.glob("eval/*")) - before
        return made


@pytest.fixture(scope="session")
def trained(reference: Callable[[str], Reference]) -> Callable[[str], Alone]:
    """The task's reference last.ckpt alone (its run folder renamed away), with an empty cache of its own."""

    done: dict[str, Alone] = {}

    def alone(task: str) -> Alone:
        if task not in done:
            ref = reference(task)
            done[task] = Alone(task, ref.alone, ref.data, ref.base / "cache-commands", ref.said)
        return done[task]

    return alone


def predictions(folder: Path) -> list[dict[str, Any]]:
    """The rows of predict's predictions.jsonl."""
    return [json.loads(line) for line in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]


def logged_metric(folder: Path, name: str) -> float:
    """A test metric's value from the eval folder's metrics.csv."""
    for path in folder.rglob("metrics.csv"):
        with path.open(encoding="utf-8") as f:
            values = [row[name] for row in csv.DictReader(f) if row.get(name)]
        if values:
            return float(values[-1])
    raise AssertionError(f"{name} not logged under {folder}")


@pytest.mark.slow
@pytest.mark.parametrize("task", LABELLED)
def test_predicted_labels_score_what_test_reports(trained: Callable[[str], Alone], task: str) -> None:
    """`test` and `predict` on the same rows, from the checkpoint alone: predict's accuracy is test's."""
    run = trained(task)
    val = run.data["val_path"]
    tested = run.run("test", "--ckpt_path", run.ckpt, "--data.test_path", val)
    predicted = predictions(run.run("predict", "--ckpt_path", run.ckpt, "--data.predict_path", val))
    gold = [row.get("label") or Path(row["path"]).parent.name for row in predicted]  # a CSV's column, or the folder
    accuracy = sum(row["predicted"] == label for row, label in zip(predicted, gold, strict=True)) / len(predicted)
    assert accuracy == pytest.approx(logged_metric(tested, "test/acc"), abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("task", GENERATIVE)
def test_predict_generates_what_generate_does(trained: Callable[[str], Alone], task: str, tmp_path: Path) -> None:
    """`predict` on a prompts file and `generate` on its first prompt, greedy, from the checkpoint alone: one text.
    (The chat reference decodes greedily by default: both commands take its defaults, no decoding option.)"""
    run = trained(task)
    decoding = () if task in CHAT else GREEDY
    asked = [QUESTION, *PROMPTS[1:]] if task in CHAT else PROMPTS  # the chat export test's question
    prompts = tmp_path / "prompts.jsonl"
    rows = [prompt_row(task, p, i) for i, p in enumerate(asked)]
    prompts.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    predicted = predictions(run.run("predict", "--ckpt_path", run.ckpt, "--data.predict_path", prompts, *decoding))
    assert len(predicted) == len(asked)
    shown = run.generated(asked[0], *generate_options(decoding))  # one generate process is enough to compare
    expected = asked[0] + predicted[0]["generated"] if task == "language_modeling" else predicted[0]["generated"]
    assert shown.rstrip("\n") == expected, (shown, predicted[0])  # a language model's output continues the prompt


def generate_options(decoding: tuple[str, ...]) -> tuple[str, ...]:
    """`generate`'s options for predict's decoding overrides (greedy, 8 new tokens), or none for none."""
    return ("--greedy", "--max-new-tokens", "8") if decoding else ()


def prompt_row(task: str, prompt: str, index: int) -> dict[str, Any]:
    """One predict input: a chat's as a prompt record, then as a conversation (the shape of training files)."""
    if task in CHAT:
        return {"prompt": prompt} if index == 0 else {"messages": [{"role": "user", "content": prompt}]}
    if task == "seq2seq":
        return {"source": prompt}
    return {"text": prompt}


@pytest.mark.slow
@pytest.mark.parametrize("task", list(REFERENCE))
def test_export_predicts_what_the_checkpoint_does(trained: Callable[[str], Alone], task: str) -> None:
    """`convert to-hf` from the checkpoint alone writes a folder transformers loads, whose outputs are ours."""
    run = trained(task)
    out = run.exported()
    config = transformers.AutoConfig.from_pretrained(out)
    theirs = getattr(transformers, config.architectures[0]).from_pretrained(out).eval()
    net = load_task_module(run.ckpt).net.eval()
    ours = export_class(net).from_network(net, config.to_dict()).eval()
    inputs = hf_inputs(config)
    with torch.no_grad():
        torch.testing.assert_close(ours(**inputs).logits, theirs(**inputs).logits, atol=1e-4, rtol=1e-4)


def hf_inputs(config: transformers.PretrainedConfig) -> dict[str, torch.Tensor]:
    """Random inputs under Hugging Face's names for a model of this config (a private generator)."""
    generator = torch.Generator().manual_seed(0)
    if config.model_type == "vit":
        size = (2, config.num_channels, config.image_size, config.image_size)
        return {"pixel_values": torch.randn(*size, generator=generator)}
    ids = torch.randint(0, config.vocab_size, (2, 8), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.randint(0, config.vocab_size, (2, 5), generator=generator)
    return inputs


@pytest.mark.slow
@pytest.mark.parametrize("task", ["instruction_tuning"])
def test_the_chat_export_replies_as_generate_does(trained: Callable[[str], Alone], task: str) -> None:
    """LoRA on a Qwen2 folder, chat SFT (the reference); `generate --chat` from the checkpoint alone with its
    defaults; transformers' `generate` on the export, with the export's own defaults and chat template, gives our
    reply's ids and stops where ours stops (at <|im_end|> or eos, which its generation_config.json names)."""
    run = trained(task)
    # the folder's tokenizer lacks the chat tokens: their rows grow, said in one line; with `head` adapted, the
    # output projection's <|im_end|> row can move from the mean of the others, where it never wins a greedy choice
    assert "grew 2 rows (<|im_start|>, <|im_end|>) of " in run.said and "can never end" not in run.said, run.said
    reply = run.generated(QUESTION).rstrip("\n")
    out = run.exported()
    exported = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    stops = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id]
    saved = json.loads((out / "generation_config.json").read_text(encoding="utf-8"))
    assert saved["eos_token_id"] == stops and saved["do_sample"] is False, saved
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        theirs = exported.generate(**prompt)[0, prompt["input_ids"].shape[1] :].tolist()  # the export's defaults
    assert tokenizer.decode(theirs, skip_special_tokens=True) == reply
    ended = len(theirs) < REPLY_TOKENS or theirs[-1] in stops
    body = theirs[:-1] if ended and theirs[-1] in stops else theirs
    assert body == tokenizer(reply, add_special_tokens=False)["input_ids"]  # the same ids, not only the same text
    assert all(t not in stops for t in body)  # transformers stopped at the first end token, as ours does


@pytest.mark.slow
@pytest.mark.parametrize("task", ["instruction_tuning"])
def test_the_lora_adapters_leave_for_peft_and_come_back(
    trained: Callable[[str], Alone], reference: Callable[[str], Reference], task: str, tmp_path: Path
) -> None:
    """`convert to-peft` on the chat reference alone (LoRA on a Qwen2 folder, two chat tokens grown, said in one
    line): transformers + peft, the base resized to the folder's tokenizer, give the checkpoint's logits and greedy
    ids; `predict` starting from that folder (--model.lora.adapters on the reference's config) replies as
    `generate --chat` does from the checkpoint."""
    run = trained(task)
    out = run.ckpt.parent.parent / "peft"
    said = tetraformer("convert", "to-peft", run.ckpt, out, cache_dir=run.cache).stderr
    assert "model.resize_token_embeddings(" in said, said
    config = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    base = transformers.AutoModelForCausalLM.from_pretrained(config["base_model_name_or_path"])
    base.resize_token_embeddings(len(tokenizer))
    theirs = PeftModel.from_pretrained(base, out).eval()
    net = load_task_module(run.ckpt).net.eval()
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    ids = prompt["input_ids"]
    decoding = GenerationConfig(max_new_tokens=REPLY_TOKENS, do_sample=False, eos_token_id=None)
    with torch.no_grad():
        torch.testing.assert_close(theirs(**prompt).logits, net(ids), rtol=0, atol=1e-4)
        expected = theirs.generate(**prompt, max_new_tokens=REPLY_TOKENS, do_sample=False, eos_token_id=None)
    assert torch.equal(generate(net, ids, None, decoding), expected)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": QUESTION}) + "\n", encoding="utf-8")
    lora = {**REFERENCE[task]["model"]["lora"], "adapters": str(out)}
    started = write_yaml(tmp_path / "started.yaml", reference(task).config(tmp_path / "run", model={"lora": lora}))
    tetraformer("predict", "-c", started, "--data.predict_path", prompts, cache_dir=run.cache)
    (found,) = (tmp_path / "run").rglob("predictions.jsonl")
    assert predictions(found.parent)[0]["generated"] == run.generated(QUESTION).rstrip("\n")
