"""The public surface of ``deepresearcher`` is what ``__all__`` says, and every name in it exists."""

import deepresearcher


def test_all_names_exist_and_nothing_public_is_missing() -> None:
    for name in deepresearcher.__all__:
        assert hasattr(deepresearcher, name), name
    public = {n for n in vars(deepresearcher) if not n.startswith("_") and not isinstance(getattr(deepresearcher, n), type(deepresearcher))}
    assert public <= set(deepresearcher.__all__), public - set(deepresearcher.__all__)
