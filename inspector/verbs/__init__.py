"""The verbs' logic, a layer above the Report: check's findings per chip (`checking`), compare's
rows (`comparison`), fix's trials (`fixing`) and the patches it writes (`patching`), and what each
verb accepts (`rules`), called by the CLI, the Python API and the terminal UI alike."""
