"""The client a scope belongs to: a client's own scope is itself, a user scope its client's."""

from __future__ import annotations

from shared.domain.client_ids import owning_client, user_scope


def test_a_scope_belongs_to_its_client() -> None:
    assert owning_client("school-a") == "school-a"
    assert owning_client(user_scope("school-a", "ada")) == "school-a"
    assert owning_client(user_scope("school a", "ada lovelace")) == "school a"
    # A user id is the sign-in provider's: it may hold the mark itself.
    assert owning_client(user_scope("school-a", "x:user:y")) == "school-a"
