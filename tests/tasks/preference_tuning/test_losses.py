"""The preference losses equal TRL's on fixed batches, and DPO starts at ln 2 where the policy is its reference."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers

from tasks.preference_tuning.losses import Replies, preference_losses
from tasks.preference_tuning.module import PreferenceTuning
from tetraformer.core.lora import LoRAConfig
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.spec import DataSpec
from tetraformer.data.tokenizer import load_tokenizer
from tetraformer.training.checkpointing.loading import load_weights, starting_point

PAIRS, LENGTH, PROMPT = 3, 14, 5  # pairs in the fixed batch, tokens a row, prompt tokens before each reply


def fixed_batch(vocab: int) -> dict[str, torch.Tensor]:
    """TRL's inputs for PAIRS pairs: (2P, LENGTH) ids, the chosen rows then the rejected, replies of different
    lengths after a shared prompt, right-padded; completion_mask marks the reply tokens."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (2 * PAIRS, LENGTH), generator=generator)
    ids[PAIRS:, :PROMPT] = ids[:PAIRS, :PROMPT]  # each pair's replies follow the same prompt
    ends = torch.tensor([LENGTH, LENGTH - 3, LENGTH - 1, LENGTH - 2, LENGTH, LENGTH - 5])  # (2P,) where rows end
    real = torch.arange(LENGTH) < ends[:, None]  # (2P, LENGTH)
    completion = real & (torch.arange(LENGTH) >= PROMPT)
    return {"input_ids": ids.masked_fill(~real, 0), "attention_mask": real.long(), "completion_mask": completion.long()}


def ours(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same pairs as this task's collator gives them: shifted ids, labels on the reply tokens only."""
    labels = batch["input_ids"][:, 1:].masked_fill(batch["completion_mask"][:, 1:] == 0, IGNORE_INDEX)
    return {"input_ids": batch["input_ids"][:, :-1], "labels": labels, "attention_mask": batch["attention_mask"]}


def module_from(folder: Path, **options: object) -> PreferenceTuning:
    """A PreferenceTuning module built from a Hugging Face folder, its tokenizer as it is (no chat tokens added)."""
    module = PreferenceTuning(init_from=str(folder), **options)
    module.use_spec(DataSpec.of(load_tokenizer(folder), max_length=LENGTH))
    module.configure_model()
    return module.eval()


def nudged(folder: Path, out: Path) -> Path:
    """The folder's model with every weight moved by seeded noise, saved to `out` (a policy unlike its reference)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    model.save_pretrained(out)
    load_tokenizer(folder).save_pretrained(out)
    return out


def test_dpo_and_ipo_equal_trl_on_a_fixed_batch(qwen2: Path, tmp_path: Path) -> None:
    """On the same weights (a policy moved away from the folder it started from, the reference) and the same pairs,
    the DPO and IPO losses equal TRL's DPOTrainer's within 1e-5."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer  # a test reference only: imported here (seconds)

    policy_dir = nudged(qwen2, tmp_path / "policy")
    module = module_from(qwen2)  # its reference: the folder as it starts
    load_weights(module.net, starting_point(policy_dir)[1], str(policy_dir))
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen2)
    fp32 = DPOConfig(tmp_path / "trl", beta=0.1, bf16=False, use_cpu=True, report_to=[], gradient_checkpointing=False)
    trainer = DPOTrainer(
        model=transformers.AutoModelForCausalLM.from_pretrained(policy_dir),
        ref_model=transformers.AutoModelForCausalLM.from_pretrained(qwen2),
        args=fp32,  # TRL's default is bf16 autocast, even on a CPU
        train_dataset=Dataset.from_dict({"prompt": ["a"], "chosen": ["b"], "rejected": ["c"]}),
        processing_class=tokenizer,
    )
    trainer.model.eval()
    batch = fixed_batch(len(tokenizer))
    for kind, trl_kind in (("dpo", "sigmoid"), ("ipo", "ipo")):
        module.loss_kind, trainer.loss_types = kind, [trl_kind]
        with torch.no_grad():
            theirs = trainer._compute_loss(trainer.model, batch, return_outputs=False)
            mine = module.compute(ours(batch), "val")["loss"]
        assert abs(theirs.item() - math.log(2)) > 1e-3, "the policy must differ from its reference"
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0, msg=kind)


def test_conservative_dpo_and_simpo_equal_trl() -> None:
    """cDPO (DPO with label smoothing) and SimPO equal TRL's CPO loss (sigmoid on the log-ratios, simpo on the
    per-token log-probabilities) within 1e-5 on fixed log-probabilities."""
    from trl.experimental.cpo import CPOTrainer  # TRL's loss function of CPO and SimPO

    generator = torch.Generator().manual_seed(0)
    policy = Replies(*(-20 * torch.rand(2, 5, generator=generator)), torch.tensor([3, 7, 1, 4, 9]), torch.arange(2, 7))
    reference = Replies(*(-20 * torch.rand(2, 5, generator=generator)), policy.chosen_tokens, policy.rejected_tokens)
    ratios = policy - reference
    cpu = SimpleNamespace(device=torch.device("cpu"))
    conservative = SimpleNamespace(alpha=0.0, loss_type="sigmoid", beta=0.3, label_smoothing=0.2, accelerator=cpu)
    theirs, *_ = CPOTrainer.cpo_loss(conservative, ratios.chosen, ratios.rejected)
    mine = preference_losses("dpo", policy, reference, beta=0.3, smoothing=0.2)
    torch.testing.assert_close(mine.loss, theirs, atol=1e-5, rtol=0)
    simpo = SimpleNamespace(
        alpha=0.0, loss_type="simpo", beta=2.0, simpo_gamma=0.7, label_smoothing=0.1, accelerator=cpu
    )
    theirs, chosen_rewards, rejected_rewards = CPOTrainer.cpo_loss(simpo, *policy.per_token())
    mine = preference_losses("simpo", policy, None, beta=2.0, smoothing=0.1, gamma=0.7)
    torch.testing.assert_close(mine.loss, theirs, atol=1e-5, rtol=0)
    torch.testing.assert_close((mine.chosen_rewards, mine.rejected_rewards), (chosen_rewards, rejected_rewards))


@pytest.mark.parametrize("lora", [None, LoRAConfig(rank=4, targets=["q", "v", "ff_in"])], ids=["copy", "lora"])
def test_the_first_step_is_ln_2(qwen2: Path, lora: LoRAConfig | None) -> None:
    """Where the policy is its reference (the frozen copy, or the network with its new adapters off), the DPO loss is
    ln 2, every reward 0, and the loss still has a gradient for the policy."""
    module = module_from(qwen2, lora=lora)
    out = module.train().compute(ours(fixed_batch(len(module.tokenizer))), "train")
    torch.testing.assert_close(out["loss"], torch.tensor(math.log(2)), atol=1e-6, rtol=0)
    assert out["rewards_chosen"] == out["rewards_rejected"] == out["reward_margin"] == 0
    out["loss"].backward()
    grads = [p.grad for p in module.net.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)
