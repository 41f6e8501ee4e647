"""Every model kind, registered on import (`mia_core.model.kinds`), and `kind_of` over them: the order here is the order
kinds are asked to recognise a spec; the folder kind takes what none recognises."""
from ..kinds import KINDS, kind_of
from . import chat, demo, folder, served

__all__ = ["KINDS", "chat", "demo", "folder", "kind_of", "served"]
