"""When to refresh and what expiry kubectl is told."""

from datetime import UTC, datetime, timedelta

from app.oidc.tokens import TokenSet

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def tokens(lifetime: timedelta) -> TokenSet:
    return TokenSet(
        expires_at=T0 + lifetime,
        issued_at=T0,
        id_token="x",
        refresh_token="r",
        claims={"email": "e@x"},
    )


def test_margin_is_the_larger_of_a_minute_and_a_tenth() -> None:
    assert tokens(timedelta(hours=1)).margin() == timedelta(minutes=6)
    assert tokens(timedelta(minutes=5)).margin() == timedelta(minutes=1)
    assert tokens(timedelta(seconds=20)).margin() == timedelta(seconds=10)  # capped at half


def test_refresh_ahead_comes_before_callers_see_it_stale() -> None:
    t = tokens(timedelta(hours=1))
    assert t.refresh_due() < t.expires_at - t.margin()
    assert t.fresh(t.refresh_due())
    assert not t.fresh(t.expires_at - t.margin())


def test_handed_out_expiry_is_less_the_margin_and_never_past() -> None:
    t = tokens(timedelta(hours=1))
    assert t.handed_out_expiry(T0) == T0 + timedelta(minutes=54)
    late = T0 + timedelta(minutes=59, seconds=50)
    assert late < t.handed_out_expiry(late) <= t.expires_at


def test_round_trip_and_refresh_keeps_what_the_provider_left_out() -> None:
    t = tokens(timedelta(hours=1))
    assert TokenSet.from_bytes(t.to_bytes()) == t
    newer = TokenSet(expires_at=T0 + timedelta(hours=2), issued_at=T0, id_token="y")
    merged = t.with_refresh(newer)
    assert (
        merged.refresh_token == "r" and merged.id_token == "y" and merged.claims == {"email": "e@x"}
    )
    assert merged.who() == "e@x"


def test_a_larger_floor_from_the_settings() -> None:
    t = tokens(timedelta(hours=1))
    floor = timedelta(minutes=15)
    assert t.margin(floor) == timedelta(minutes=15)
    assert t.fresh(T0 + timedelta(minutes=44), floor) and not t.fresh(
        T0 + timedelta(minutes=46), floor
    )
    assert t.handed_out_expiry(T0, floor) == T0 + timedelta(minutes=45)
