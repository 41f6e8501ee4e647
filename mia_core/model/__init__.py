"""Step 1–2 of the flow: a model spec becomes a `LanguageModel`, and texts become `TokenStats` (one forward pass).

loading (safe `load_model`), builtin (the demo models), lora (adapters), language_model, policy
(`StatsPolicy`), encoding (batched tokenising with offsets), forward and fused_stats (batched passes
reduced to statistics), pipeline (batches launched ahead of the host's work), device_mask (a padded batch's
attention mask built on the device, so a launch never waits), reduce, boundary (BOS policy), stats_cache
(on-disk cache), cache_writes (its entries written on a thread beside the pass), identity (fingerprints).
"""
