"""contextrag.llm: one client interface, one on-disk call cache, one cost ledger."""
from .base import Completion, LLMClient, Message, STAGES
from .ledger import CostLedger, StageCost

__all__ = ["Completion", "LLMClient", "Message", "STAGES", "CostLedger", "StageCost"]
