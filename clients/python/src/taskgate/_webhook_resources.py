"""The webhooks' resources: `tg.webhook_endpoints`, `tg.webhook_deliveries` and
`tg.webhooks` (the secret that signs calls' own webhooks), sync and async.

Verifying what a receiver gets is `taskgate.webhooks.verify`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, Optional, Sequence

from . import _base
from ._models import (
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookEndpoint,
    WebhookEndpointList,
)

if TYPE_CHECKING:
    from ._async_client import AsyncTaskgate
    from ._client import Taskgate

__all__ = [
    "WebhookEndpoints",
    "WebhookDeliveries",
    "Webhooks",
    "AsyncWebhookEndpoints",
    "AsyncWebhookDeliveries",
    "AsyncWebhooks",
]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""A field left as it is by `update` (where None means "remove")."""


def _create_body(url: str, events: Optional[Sequence[str]], description: Optional[str]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"url": url}
    if events is not None:
        body["events"] = list(events)
    if description is not None:
        body["description"] = description
    return body


def _update_body(url: Any, events: Any, description: Any, enabled: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if url is not UNSET:
        body["url"] = url
    if events is not UNSET:
        body["events"] = list(events)
    if description is not UNSET:
        body["description"] = description
    if enabled is not UNSET:
        body["enabled"] = enabled
    return body


def _endpoint(endpoint_id: str, more: str = "") -> str:
    return f"/webhook_endpoints/{_base.path_segment(endpoint_id)}{more}"


def _delivery(delivery_id: str, more: str = "") -> str:
    return f"/webhook_deliveries/{_base.path_segment(delivery_id)}{more}"


class WebhookEndpoints:
    """`tg.webhook_endpoints`: where the key's account and mode gets its tasks' events."""

    def __init__(self, client: "Taskgate") -> None:
        self._client = client

    def create(
        self, url: str, *, events: Optional[Sequence[str]] = None, description: Optional[str] = None
    ) -> WebhookEndpoint:
        """Makes an endpoint; its `secret` (`whsec_…`) is in the answer. `events`
        defaults to task.succeeded, task.failed and task.cancelled."""
        data = self._client._request("POST", "/webhook_endpoints", json=_create_body(url, events, description))
        return WebhookEndpoint.from_dict(data)

    def get(self, endpoint_id: str) -> WebhookEndpoint:
        return WebhookEndpoint.from_dict(self._client._request("GET", _endpoint(endpoint_id)))

    def update(
        self,
        endpoint_id: str,
        *,
        url: Any = UNSET,
        events: Any = UNSET,
        description: Any = UNSET,
        enabled: Any = UNSET,
    ) -> WebhookEndpoint:
        """Changes what is given (`description=None` removes it; `enabled=True`
        re-enables an endpoint disabled for any reason)."""
        body = _update_body(url, events, description, enabled)
        return WebhookEndpoint.from_dict(self._client._request("PATCH", _endpoint(endpoint_id), json=body))

    def delete(self, endpoint_id: str) -> None:
        self._client._request("DELETE", _endpoint(endpoint_id))

    def list(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> Iterator[WebhookEndpoint]:
        """Every endpoint, oldest first, page after page (`limit` is the page size)."""
        while True:
            page = self.list_page(limit=limit, cursor=cursor)
            yield from page.items
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    def list_page(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> WebhookEndpointList:
        params = _base.query(limit=limit, cursor=cursor)
        return WebhookEndpointList.from_dict(self._client._request("GET", "/webhook_endpoints", params=params))

    def secret(self, endpoint_id: str) -> str:
        """The endpoint's signing secret (`whsec_…`)."""
        return str(self._client._request("GET", _endpoint(endpoint_id, "/secret"))["secret"])

    def rotate_secret(self, endpoint_id: str) -> str:
        """A new secret; the old one keeps signing beside it for a while (24 h by default)."""
        return str(self._client._request("POST", _endpoint(endpoint_id, "/rotate_secret"))["secret"])

    def test(self, endpoint_id: str) -> WebhookDelivery:
        """Sends the endpoint a `webhook.test` event now; its delivery."""
        return WebhookDelivery.from_dict(self._client._request("POST", _endpoint(endpoint_id, "/test")))


class WebhookDeliveries:
    """`tg.webhook_deliveries`: the delivery log, newest first, and replays."""

    def __init__(self, client: "Taskgate") -> None:
        self._client = client

    def get(self, delivery_id: str) -> WebhookDelivery:
        return WebhookDelivery.from_dict(self._client._request("GET", _delivery(delivery_id)))

    def retry(self, delivery_id: str) -> WebhookDelivery:
        """Sends it again now (a new attempt, the same `webhook-id`)."""
        return WebhookDelivery.from_dict(self._client._request("POST", _delivery(delivery_id, "/retry")))

    def list(
        self,
        limit: Optional[int] = None,
        endpoint_id: Optional[str] = None,
        task_id: Optional[str] = None,
        status: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> Iterator[WebhookDelivery]:
        while True:
            page = self.list_page(limit=limit, endpoint_id=endpoint_id, task_id=task_id, status=status, cursor=cursor)
            yield from page.items
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    def list_page(
        self,
        limit: Optional[int] = None,
        endpoint_id: Optional[str] = None,
        task_id: Optional[str] = None,
        status: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> WebhookDeliveryList:
        params = _base.query(limit=limit, endpoint_id=endpoint_id, task_id=task_id, status=status, cursor=cursor)
        return WebhookDeliveryList.from_dict(self._client._request("GET", "/webhook_deliveries", params=params))


class Webhooks:
    """`tg.webhooks`: the secret that signs calls' own webhooks (`call(..., webhook=…)`)."""

    def __init__(self, client: "Taskgate") -> None:
        self._client = client

    def signing_secret(self) -> str:
        return str(self._client._request("GET", "/webhooks/secret")["secret"])

    def rotate_signing_secret(self) -> str:
        return str(self._client._request("POST", "/webhooks/secret/rotate")["secret"])


class AsyncWebhookEndpoints:
    """`tg.webhook_endpoints` of `AsyncTaskgate`."""

    def __init__(self, client: "AsyncTaskgate") -> None:
        self._client = client

    async def create(
        self, url: str, *, events: Optional[Sequence[str]] = None, description: Optional[str] = None
    ) -> WebhookEndpoint:
        data = await self._client._request("POST", "/webhook_endpoints", json=_create_body(url, events, description))
        return WebhookEndpoint.from_dict(data)

    async def get(self, endpoint_id: str) -> WebhookEndpoint:
        return WebhookEndpoint.from_dict(await self._client._request("GET", _endpoint(endpoint_id)))

    async def update(
        self,
        endpoint_id: str,
        *,
        url: Any = UNSET,
        events: Any = UNSET,
        description: Any = UNSET,
        enabled: Any = UNSET,
    ) -> WebhookEndpoint:
        body = _update_body(url, events, description, enabled)
        return WebhookEndpoint.from_dict(await self._client._request("PATCH", _endpoint(endpoint_id), json=body))

    async def delete(self, endpoint_id: str) -> None:
        await self._client._request("DELETE", _endpoint(endpoint_id))

    async def list(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> AsyncIterator[WebhookEndpoint]:
        while True:
            page = await self.list_page(limit=limit, cursor=cursor)
            for item in page.items:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list_page(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> WebhookEndpointList:
        params = _base.query(limit=limit, cursor=cursor)
        return WebhookEndpointList.from_dict(await self._client._request("GET", "/webhook_endpoints", params=params))

    async def secret(self, endpoint_id: str) -> str:
        return str((await self._client._request("GET", _endpoint(endpoint_id, "/secret")))["secret"])

    async def rotate_secret(self, endpoint_id: str) -> str:
        return str((await self._client._request("POST", _endpoint(endpoint_id, "/rotate_secret")))["secret"])

    async def test(self, endpoint_id: str) -> WebhookDelivery:
        return WebhookDelivery.from_dict(await self._client._request("POST", _endpoint(endpoint_id, "/test")))


class AsyncWebhookDeliveries:
    """`tg.webhook_deliveries` of `AsyncTaskgate`."""

    def __init__(self, client: "AsyncTaskgate") -> None:
        self._client = client

    async def get(self, delivery_id: str) -> WebhookDelivery:
        return WebhookDelivery.from_dict(await self._client._request("GET", _delivery(delivery_id)))

    async def retry(self, delivery_id: str) -> WebhookDelivery:
        return WebhookDelivery.from_dict(await self._client._request("POST", _delivery(delivery_id, "/retry")))

    async def list(
        self,
        limit: Optional[int] = None,
        endpoint_id: Optional[str] = None,
        task_id: Optional[str] = None,
        status: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> AsyncIterator[WebhookDelivery]:
        while True:
            page = await self.list_page(
                limit=limit, endpoint_id=endpoint_id, task_id=task_id, status=status, cursor=cursor
            )
            for item in page.items:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list_page(
        self,
        limit: Optional[int] = None,
        endpoint_id: Optional[str] = None,
        task_id: Optional[str] = None,
        status: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> WebhookDeliveryList:
        params = _base.query(limit=limit, endpoint_id=endpoint_id, task_id=task_id, status=status, cursor=cursor)
        return WebhookDeliveryList.from_dict(await self._client._request("GET", "/webhook_deliveries", params=params))


class AsyncWebhooks:
    """`tg.webhooks` of `AsyncTaskgate`."""

    def __init__(self, client: "AsyncTaskgate") -> None:
        self._client = client

    async def signing_secret(self) -> str:
        return str((await self._client._request("GET", "/webhooks/secret"))["secret"])

    async def rotate_signing_secret(self) -> str:
        return str((await self._client._request("POST", "/webhooks/secret/rotate"))["secret"])
