"""Streamlit helpers shared by the dashboard pages (the core stays in `mia_core`)."""
