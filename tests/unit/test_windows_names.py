"""The Windows pipe name and its security descriptor (the Win32 calls themselves run only there)."""

import pytest

from exec_helper.windows_names import pipe_name, security_descriptor_sddl

SID = "S-1-5-21-3623811015-3361044348-30300820-1013"


def test_pipe_is_per_user_and_session() -> None:
    assert pipe_name(SID, 1) == r"\\.\pipe\kubetray-S-1-5-21-3623811015-3361044348-30300820-1013-1"
    assert pipe_name(SID, 1) != pipe_name(SID, 2)
    assert pipe_name(SID, 1) != pipe_name("S-1-5-21-1-2-3-1014", 1)


def test_descriptor_allows_only_the_user_and_inherits_nothing() -> None:
    sddl = security_descriptor_sddl(SID)
    assert sddl == f"O:{SID}G:{SID}D:P(A;;GA;;;{SID})"
    dacl = sddl.split("D:", 1)[1]
    assert dacl.startswith("P") and dacl.count("(") == 1  # protected, one ACE
    assert "WD" not in sddl and "AU" not in sddl  # not Everyone, not Authenticated Users


@pytest.mark.parametrize("bad", ["", "Everyone", "S-1-5-21-x", "S-1-1-0)(A;;GA;;;WD"])
def test_injection_through_the_sid_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a string SID"):
        security_descriptor_sddl(bad)
