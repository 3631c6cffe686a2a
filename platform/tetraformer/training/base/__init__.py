"""Base classes every task builds on: TaskModule, TaskDataModule, the labelled mixin, optimizer, compile, generation."""
