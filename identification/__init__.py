"""identification: fitting diffmbs models to measurements (SRS or time histories).

The fitting toolkit (parameter spaces, experiments, misfits, fitters, sensitivities) arrives with
the first end-to-end identification; see ARCHITECTURE.md.
"""
