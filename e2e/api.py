"""A small client of the test cluster's API server (requests over HTTPS with the harness CA and a bearer token)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import requests


class ApiError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status

    @property
    def transient(self) -> bool:
        """Whether a retry may succeed (429: too many requests or storage (re)initializing; 5xx), as client-go's
        callers retry them."""
        return self.status == 429 or self.status >= 500


class Api:
    """Requests to ``server`` as the holder of ``token``, trusting ``ca_file``.

    :param server: ``https://127.0.0.1:<port>``.
    :param token: A bearer token (the harness's admin token, or a service account's).
    :param ca_file: The CA of the API server's certificate.
    """

    def __init__(self, server: str, token: str, ca_file: str) -> None:
        self.server = server
        self._session = requests.Session()
        # Not the environment's CA bundle (REQUESTS_CA_BUNDLE would replace ``verify``) nor its proxies.
        self._session.trust_env = False
        self._session.headers["Authorization"] = f"Bearer {token}"
        self._session.verify = ca_file
        self._resources: Dict[Tuple[str, str], Tuple[str, bool]] = {}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        """``method`` on ``path``; the decoded answer (ApiError for a status of 400 or more)."""
        data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        response = self._session.request(
            method, self.server + path, data=data, headers={"Content-Type": content_type}, timeout=60
        )
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise ApiError(response.status_code, message)
        return response.json() if response.content else None

    def impersonating(self, user: str, group: str) -> "Api":
        """A client that acts as ``user`` in ``group`` (Kubernetes user impersonation: the ``Impersonate-User`` and
        ``Impersonate-Group`` headers, which the harness's admin may send), to check what an identity bound by RBAC,
        such as an EKS access entry's group, may do."""
        other = Api.__new__(Api)
        other.server = self.server
        other._session = requests.Session()
        other._session.trust_env = False
        other._session.headers.update(self._session.headers)
        other._session.headers["Impersonate-User"] = user
        other._session.headers["Impersonate-Group"] = group
        other._session.verify = self._session.verify
        other._resources = self._resources
        return other

    def ready(self) -> bool:
        """Whether the API server answers ``/readyz`` with 200."""
        return self._session.get(self.server + "/readyz", timeout=5).status_code == 200

    def _discover(self) -> None:
        groups = [("", "v1", "/api/v1")]
        for group in self.request("GET", "/apis")["groups"]:
            for version in group["versions"]:
                groups.append((group["name"], version["version"], f"/apis/{group['name']}/{version['version']}"))
        for _group, _version, prefix in groups:
            try:
                listing = self.request("GET", prefix)
            except ApiError:
                continue
            api_version = listing["groupVersion"]
            for resource in listing["resources"]:
                if "/" not in resource["name"]:
                    self._resources[(api_version, resource["kind"])] = (resource["name"], resource["namespaced"])

    def resource(self, api_version: str, kind: str) -> Tuple[str, bool]:
        """(plural name, namespaced) of a kind (discovery is read again for a kind it did not list)."""
        if (api_version, kind) not in self._resources:
            self._discover()
        if (api_version, kind) not in self._resources:
            raise ApiError(404, f"the server does not serve {kind} in {api_version}")
        return self._resources[(api_version, kind)]

    def path(self, api_version: str, kind: str, namespace: Optional[str] = None, name: Optional[str] = None) -> str:
        """The URL path of a collection (no ``name``) or an object."""
        plural, namespaced = self.resource(api_version, kind)
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced and namespace:
            prefix += f"/namespaces/{namespace}"
        return f"{prefix}/{plural}" + (f"/{name}" if name else "")

    def get(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[Dict]:
        """The object, or None when there is none."""
        try:
            return self.request("GET", self.path(api_version, kind, namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: Optional[str] = None, selector: Optional[str] = None
    ) -> List[Dict]:
        """The objects of a kind (in ``namespace``, or everywhere), with ``selector`` a label selector."""
        query = f"?labelSelector={requests.utils.quote(selector)}" if selector else ""
        items = self.request("GET", self.path(api_version, kind, namespace) + query)["items"]
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def create(self, manifest: Mapping[str, Any]) -> Dict:
        """Create the object."""
        namespace = manifest.get("metadata", {}).get("namespace")
        return self.request("POST", self.path(manifest["apiVersion"], manifest["kind"], namespace), manifest)

    def apply(self, manifest: Mapping[str, Any], manager: str = "trainium-eks-e2e") -> Dict:
        """Server-side apply of the object (forced: the harness owns what it applies)."""
        metadata = manifest["metadata"]
        path = self.path(manifest["apiVersion"], manifest["kind"], metadata.get("namespace"), metadata["name"])
        return self.request(
            "PATCH", f"{path}?fieldManager={manager}&force=true", manifest, "application/apply-patch+yaml"
        )

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any],
        namespace: Optional[str] = None,
        subresource: str = "",
    ) -> Dict:
        """A JSON merge patch of the object (or of its ``subresource``, e.g. ``status``)."""
        path = self.path(api_version, kind, namespace, name) + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> bool:
        """Delete the object in the foreground; False when there was none."""
        try:
            self.request(
                "DELETE",
                self.path(api_version, kind, namespace, name),
                {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
            )
            return True
        except ApiError as error:
            if error.status == 404:
                return False
            raise

    def token(self, namespace: str, service_account: str, seconds: int = 86400) -> str:
        """A token of the service account (TokenRequest), as kubelet mounts one into its pods."""
        answer = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}},
        )
        return answer["status"]["token"]
