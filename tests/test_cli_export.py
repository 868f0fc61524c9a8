"""`mha export`: help on every subcommand, and no heavy import on the grading path."""
from __future__ import annotations

import subprocess
import sys

import pytest

from grader.cli.export import export


@pytest.mark.parametrize("command", sorted(export.commands))
def test_every_export_command_has_help_with_an_example(cli, command):
    """Every `mha export X -h` has a summary, an Example and help for each option."""
    result = cli("export", command, "-h")
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    for param in export.commands[command].params:
        if param.param_type_name == "option" and param.name != "help":
            assert param.help, f"export {command} --{param.name} has no help"


def test_grade_imports_no_export_tool():
    """`mha grade` never loads nbformat, nbclient, otter or text2qti."""
    code = ("import sys\nfrom click.testing import CliRunner\nfrom grader.cli.commands import main\n"
            "r = CliRunner().invoke(main, ['grade', 'solutions', '--problem', 'softmax'])\n"
            "assert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'nbformat', 'nbclient', 'otter', 'text2qti'}))")
    from .conftest import ROOT
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_course_without_quiz_cannot_export_one(cli, tmp_path):
    """qti/moodle on an assignment with no quiz: exit 3, saying so."""
    import shutil

    from .conftest import EXERCISES
    root = tmp_path / "exercises"
    shutil.copytree(EXERCISES, root)
    text = (root / "assignment.yaml").read_text().replace("quiz: quiz.yaml\n", "")
    text = text[:text.index("  quiz:")] if "  quiz:" in text else text  # its optional quiz items go with it
    (root / "assignment.yaml").write_text(text)
    from click.testing import CliRunner

    from grader.cli.commands import main
    result = CliRunner().invoke(main, ["--course", str(root), "export", "moodle", "--out", str(tmp_path / "q.xml")])
    assert result.exit_code == 3
    assert "this assignment has no quiz to export" in result.stderr
