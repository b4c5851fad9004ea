"""Re-run a recorded session (``eagle3lab.app.session``) on the same models and return the new one."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from eagle3lab.app.session import Session
from eagle3lab.errors import bad_input


def rerun(session: Session, out_dir=None) -> Session:
    """Run the recorded command again (same models: fingerprints checked) and return the new session."""
    from eagle3lab.bundled import ROOT

    kind = session.command.get("kind")
    if kind == "notebook":
        from eagle3lab.app.workbook import execute_notebook, notebook_parameters, notebook_session

        nb = execute_notebook(ROOT / "notebooks" / session.command["notebook"],
                              parameters=session.command.get("parameters") or None)
        new = notebook_session(nb, session.name, notebook_parameters(nb))
    elif kind == "doctor":
        from eagle3lab.app.cli import main

        with tempfile.TemporaryDirectory() as tmp:
            argv = [a for a in session.command["argv"]]
            at = argv.index("--session") if "--session" in argv else None
            if at is not None:
                argv[at + 1] = str(Path(tmp) / "s")
            else:
                argv += ["--session", str(Path(tmp) / "s")]
            with contextlib.redirect_stdout(io.StringIO()):
                main(argv)
            new = Session.load(Path(tmp) / "s")
            new.path = None
    else:
        raise bad_input(session.path or session.name, "command.kind", "notebook or doctor", kind)
    moved = {role: (m["sha256"][:12], new.models.get(role, {}).get("sha256", "")[:12])
             for role, m in session.models.items() if new.models.get(role, {}).get("sha256") != m["sha256"]}
    if moved:
        new.notes.append(f"models differ from the recorded session: {moved}")
    if out_dir is not None:
        new.save(out_dir)
    return new
