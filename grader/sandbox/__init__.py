"""The sandbox: the one place where student code runs, and the trust boundary of the grader.

What crosses the boundary, and in which form:
- in: the submission's text, and each case's arguments as plain JSON, one request per problem on
  the student's stdin; an array is named in the JSON by its shape, dtype and the place of its
  bytes in the request's binary part, sent right after the JSON line (`session._encoded_cases`);
- out: one JSON line per case on a dedicated pipe, holding tagged plain data made in the student
  process (numbers, text, lists, arrays as base64 bytes) or an error's type, bases and message.
  `codec.decode_value` checks every field and builds only plain values, ndarrays and `Opaque`;
  nothing is unpickled or evaluated. The student's stdout and stderr are kept as bounded text.
  Every text in what comes out (a type name, an error's type and message) is made inert here,
  once, by `student_text.student_text`, and carried as a `student_text.StudentText`.

Nothing of the grader is imported in the student process (`worker.py` runs as a script and
loads only `confine.py` beside it), so the reference, the cases and the expected answers
never enter it. The rest of the package calls only:
- `session.Session` (open, `run` a problem's cases, close) with `session.ProblemRun`, `session.CaseRun`,
  `session.RunStatus` and `session.StudentError` describing each run;
- `limits.Limits` (time, memory and output bounds);
- `isolation.private_paths` (the folders student code must not read);
- `spawn.prestart` and `spawn.stop_fork_server` (start and stop the fork server early);
- `codec.Opaque` and `codec.MAX_DEPTH` (how answers are represented);
- `student_text.student_text`, `student_text.one_line` and `student_text.StudentText` (the one
  boundary for text a student influences, used wherever such text enters the results);
- `isolation.protect` (make folders unreadable by other users);
- `doctor.sandbox_mode` and `doctor.unprotected_warning` (which isolation mode runs here).
As root, each student process runs in Linux namespaces where the kernel allows them (`jail.py`:
its own file system, network, IPC and process ids), else as a fresh uid only.
`session` re-exports `runs` (what a run came to). Everything else here (`spawn`, `isolation`,
`proctable`, `worker`, `confine`, `jail`, `seccomp`, `sweep`) is internal.
"""
