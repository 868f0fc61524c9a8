"""One submission: find it (`submission`, `notebook`), run its functions on the prepared cases in
the sandbox and judge the answers (`grade`, `checks`), grade its quiz answers (`answers`), and
return plain results (`results`). `fixtures` and `compiled` hold prepared cases as JSON;
`validation` checks a problem's own expected values against the reference; `otter_checks` is
what the otter export's tests call to grade one case in the student's own process."""
