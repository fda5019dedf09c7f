"""Ground-truth PushT: the gym-pusht simulator, scripted play primitives and dataset collection.

gym-pusht stands in for the real robot (DESIGN.md §5); nothing outside `pipeline.pusht` and the
`iws collect pusht` command depends on it. Submodules are imported explicitly (no re-exports)
so that importing this package stays free of pygame and pymunk.
"""
