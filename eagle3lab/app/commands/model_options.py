"""Options the commands that load the bundled models and run a draft as an engine's build declare alike
(``bench``, ``profile``): one declaration each, so their help and defaults cannot drift apart."""

from __future__ import annotations

from eagle3lab import bundled
from eagle3lab.app.cli import add_platform_argument, model_path


def add_model_arguments(parser) -> None:
    """``--target`` and ``--draft``, the bundled target and healthy draft when not given (see :func:`model_paths`)."""
    parser.add_argument("--target", default=None, help="target model folder (default: data/models/target)")
    parser.add_argument("--draft", default=None, help="draft checkpoint folder (default: data/models/draft-healthy)")


def model_paths(args) -> tuple[str, str]:
    """The target and draft folders ``--target`` / ``--draft`` name (checked to exist), bundled by default."""
    return (model_path(args.target, bundled.TARGET, "--target"),
            model_path(args.draft, bundled.DRAFT_HEALTHY, "--draft"))


def add_build_arguments(parser, release: str, decides: str, when: str = "") -> None:
    """``--engine-version`` and ``--engine-platform``: the build of the engine another option names.
    ``release``: an example release in the help; ``decides``: what the platform decides; ``when``: the help's
    lead (e.g. which option they go with)."""
    parser.add_argument("--engine-version", default=None, metavar="V",
                        help=f"{when}that engine's build (a release such as {release}, a date YYYY-MM-DD "
                             "or pre-#PR / post-#PR); default: the newest code read")
    add_platform_argument(parser, decides)
