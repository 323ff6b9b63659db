"""deepresearcher: train LLM deep-research agents with reinforcement learning against real web search."""

from deepresearcher.config import Config, load_config
from deepresearcher.errors import DeepResearcherError

__version__ = "0.1.0"

__all__ = ["Config", "DeepResearcherError", "__version__", "load_config"]
