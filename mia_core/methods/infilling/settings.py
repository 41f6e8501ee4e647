"""The infilling method's settings that its declaration and its engine share (no torch here)."""

#: How the infilling score normalises each position's log-prob: by the position's own, or by the anchor token's.
NORMALIZATIONS = ("position", "anchor")
