"""One submission: find it (`submission`, `notebook`), run its functions on the prepared cases in
the sandbox and judge the answers (`grade`, `checks`), grade its quiz answers (`answers`), and
return plain results (`results`). `seed_cases` stores a seed's prepared cases as JSON and `seed_cache` keeps them between runs;
`validation` checks a problem's own expected values against the reference; `otter_checks` is
what the otter export's tests call to grade one case in the student's own process."""
