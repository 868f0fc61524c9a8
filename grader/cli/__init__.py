"""The command line: the installed `mha` (`commands`, with `grade_all`, `export`, `release` and
`new` loaded when used), the student commands both `mha`s share and the student bundle's group
(`student_commands`), where they take their cases from (`source`), and the console-script entry
points (`launch`, which reads the command line with `chosen` before anything loads). Thin:
commands parse options, call the layers below, and print errors once (`base`)."""
