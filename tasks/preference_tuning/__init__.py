"""Preference tuning: DPO, IPO and SimPO on {prompt, chosen, rejected} pairs, from a chat model."""
