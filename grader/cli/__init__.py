"""The command line: `mha` (`commands`, with `batch`, `export` and `release` loaded when used),
the student bundle's `mha` (`student`), and the console-script entry point (`launch`).
Thin: commands parse options, call the layers below, and print errors once (`base`)."""
