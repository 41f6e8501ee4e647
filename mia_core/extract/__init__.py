"""(n,p)-discoverable extraction (Hayes et al., arXiv 2410.19482; Cooper et al., arXiv 2505.12546): how likely the
model is to reproduce each passage of a text verbatim from the passage before it — evidence about the model, beside
the membership scores (docs/methods.md, "Extraction")."""
from .result import ExtractionResult, Passage
from .run import extract_texts, extraction
from .settings import ExtractionSettings

__all__ = ["ExtractionResult", "ExtractionSettings", "Passage", "extract_texts", "extraction"]
