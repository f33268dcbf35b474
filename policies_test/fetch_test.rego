package toolgate.fetch_test

import data.toolgate.authz
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.url

# fetch evaluates the decision for a fetch call by alice.
fetch(tenant, roles, resource) := d if {
	d := authz.decision with input as request(tenant, roles, "fetch", [resource])
}

# internal_hosts lets acme's developer fetch internal.acme.test and trusts
# its private addresses.
internal_hosts := {
	"roles": {"developer": {"tools": ["fetch"], "fetch": {"hosts": ["internal.acme.test", "169.254.169.254"]}}},
	"fetch": {"allow_http": false, "allow_private_hosts": ["internal.acme.test", "169.254.169.254"]},
}

test_hosts[note] if {
	some note, c in {
		"a listed host": {"r": url("docs.python.org", "public"), "want": true},
		"a host matched by a one-label glob": {"r": url("raw.github.com", "public"), "want": true},
		"a host matched by a glob and by name": {"r": url("api.github.com", "public"), "want": true},
		"HTTPS://EXAMPLE.COM arrives as example.com, which is not listed": {"r": url("example.com", "public"), "want": false},
		"a trailing dot arrives removed": {"r": url("docs.python.org", "public"), "want": true},
		"a host that kept its trailing dot matches no glob": {"r": url("docs.python.org.", "public"), "want": false},
		"*.github.com does not cover github.com": {"r": url("github.com", "public"), "want": false},
		"*.github.com covers one label only": {"r": url("a.b.github.com", "public"), "want": false},
		"a glob is not a suffix match": {"r": url("evilgithub.com", "public"), "want": false},
		"a listed name inside another host": {"r": url("docs.python.org.evil.com", "public"), "want": false},
	}
	fetch("acme", ["developer"], c.r).allow == c.want
}

test_unlisted_host_reason if {
	d := fetch("acme", ["developer"], url("example.com", "public"))
	d.reasons == ["fetch of example.com is not allowed for your roles"]
}

test_non_public_addresses_are_denied[note] if {
	some note, c in {
		"loopback": {"class": "loopback", "reason": "fetch of docs.python.org resolves to a loopback address"},
		"private": {"class": "private", "reason": "fetch of docs.python.org resolves to a private address"},
		"link-local": {"class": "link_local", "reason": "fetch of docs.python.org resolves to a link-local address"},
		"unspecified": {"class": "unspecified", "reason": "fetch of docs.python.org resolves to an unspecified address"},
		"multicast": {"class": "multicast", "reason": "fetch of docs.python.org resolves to a multicast address"},
		"reserved": {"class": "reserved", "reason": "fetch of docs.python.org resolves to a reserved address"},
		"metadata": {"class": "metadata", "reason": "fetch of docs.python.org resolves to a metadata address"},
	}
	d := fetch("acme", ["developer"], url("docs.python.org", c.class))
	d.allow == false
	d.reasons == [c.reason]
}

test_loopback_literals_are_denied[note] if {
	some note, host in {
		"127.0.0.1": "127.0.0.1",
		"::1": "::1",
		"localhost": "localhost",
	}
	d := fetch("acme", ["developer"], url(host, "loopback"))
	d.allow == false
	sprintf("fetch of %s resolves to a loopback address", [host]) in d.reasons
}

test_address_classes_fail_closed[note] if {
	some note, c in {
		"a private address behind a public worst class": {
			"r": object.union(url("docs.python.org", "public"), {"addresses": [{"ip": "93.184.216.34", "class": "public"}, {"ip": "10.0.0.5", "class": "private"}]}),
			"reason": "fetch of docs.python.org resolves to a private address",
		},
		"a metadata address behind a public worst class": {
			"r": object.union(url("docs.python.org", "public"), {"addresses": [{"ip": "169.254.169.254", "class": "metadata"}]}),
			"reason": "fetch of docs.python.org resolves to a metadata address",
		},
		"no worst class": {
			"r": object.remove(url("docs.python.org", "public"), ["address_class"]),
			"reason": "fetch of docs.python.org resolves to a non-public address",
		},
		"an address without a class": {
			"r": object.union(url("docs.python.org", "public"), {"addresses": [{"ip": "93.184.216.34"}]}),
			"reason": "fetch of docs.python.org resolves to a non-public address",
		},
		"a class this pack does not know": {
			"r": url("docs.python.org", "carrier_grade"),
			"reason": "fetch of docs.python.org resolves to a non-public address",
		},
	}
	d := fetch("acme", ["developer"], c.r)
	d.allow == false
	c.reason in d.reasons
}

test_addresses_that_are_not_objects_are_skipped if {
	r := object.union(url("docs.python.org", "public"), {"addresses": ["93.184.216.34"]})
	fetch("acme", ["developer"], r).allow
}

test_allow_private_hosts[note] if {
	some note, c in {
		"a trusted host may resolve to a private address": {"r": url("internal.acme.test", "private"), "want": true},
		"or to loopback": {"r": url("internal.acme.test", "loopback"), "want": true},
		"but never to a metadata address": {"r": url("internal.acme.test", "metadata"), "want": false},
		"the metadata address itself stays denied even when listed": {"r": url("169.254.169.254", "metadata"), "want": false},
	}
	fetch("acme", ["developer"], c.r).allow == c.want with data.toolgate.tenants.acme as internal_hosts
}

test_a_tenant_without_fetch_settings_trusts_no_private_host if {
	d := fetch("globex", ["developer"], url("docs.python.org", "loopback")) with data.toolgate.tenants.globex.roles.developer.fetch as {"hosts": ["docs.python.org"]}
	d.reasons == ["fetch of docs.python.org resolves to a loopback address"]
}

test_schemes[note] if {
	some note, c in {
		"https is always allowed": {"scheme": "https", "allow_http": false, "want": true},
		"http needs allow_http": {"scheme": "http", "allow_http": false, "want": false},
		"http with allow_http": {"scheme": "http", "allow_http": true, "want": true},
		"other schemes never": {"scheme": "ftp", "allow_http": true, "want": false},
	}
	r := object.union(url("docs.python.org", "public"), {"scheme": c.scheme})
	fetch("acme", ["developer"], r).allow == c.want with data.toolgate.tenants.acme.fetch.allow_http as c.allow_http
}

test_scheme_reasons[note] if {
	some note, c in {
		"http": {"r": object.union(url("docs.python.org", "public"), {"scheme": "http"}), "reason": "fetch of docs.python.org over http is not allowed"},
		"no scheme": {"r": object.remove(url("docs.python.org", "public"), ["scheme"]), "reason": "fetch of docs.python.org over no scheme is not allowed"},
	}
	fetch("acme", ["developer"], c.r).reasons == [c.reason]
}

test_methods[note] if {
	some note, c in {
		"GET is allowed": {"method": "GET", "allow": true, "approval": false},
		"POST needs a human": {"method": "POST", "allow": true, "approval": true},
		"other methods are denied": {"method": "PUT", "allow": false, "approval": false},
	}
	d := fetch("acme", ["developer"], object.union(url("api.github.com", "public"), {"method": c.method}))
	d.allow == c.allow
	d.approval_required == c.approval
}

test_method_reasons[note] if {
	some note, c in {
		"POST": {"r": object.union(url("api.github.com", "public"), {"method": "POST"}), "reason": "approval required: POST to api.github.com needs a human"},
		"PUT": {"r": object.union(url("api.github.com", "public"), {"method": "PUT"}), "reason": "fetch of api.github.com with method PUT is not allowed"},
		"no method": {"r": object.remove(url("api.github.com", "public"), ["method"]), "reason": "fetch of api.github.com with method none is not allowed"},
	}
	c.reason in fetch("acme", ["developer"], c.r).reasons
}

test_malformed_urls_are_denied[note] if {
	some note, r in {
		"no host": object.remove(url("docs.python.org", "public"), ["host"]),
		"a host that is not a string": object.union(url("docs.python.org", "public"), {"host": 7}),
	}
	d := fetch("acme", ["developer"], r)
	d.reasons == ["a url resource has no host"]
}

test_fetch_is_per_role_and_tenant[note] if {
	some note, c in {
		"viewer is not offered fetch": {
			"tenant": "acme", "roles": ["viewer"],
			"reasons": ["fetch of docs.python.org is not allowed for your roles", "tool fetch is not available to you"],
		},
		"globex lists no hosts": {
			"tenant": "globex", "roles": ["developer"],
			"reasons": ["fetch of docs.python.org is not allowed for your roles"],
		},
	}
	d := fetch(c.tenant, c.roles, url("docs.python.org", "public"))
	d.allow == false
	d.reasons == c.reasons
	d.message == c.reasons[0]
}

test_allowed_fetch_decision if {
	d := fetch("acme", ["developer"], url("api.github.com", "public"))
	d == {
		"allow": true,
		"approval_required": false,
		"reasons": ["allowed: developer may fetch *.github.com", "allowed: developer may fetch api.github.com", "allowed: developer may use fetch"],
		"obligations": {"timeout_ms": 30000},
	}
}

test_fetch_carries_only_url_resources if {
	d := authz.decision with input as request("acme", ["developer"], "fetch", [{"type": "command", "segments": [["ls"]], "plain": true}])
	d.reasons == ["the call carries no url resource", "this policy only allows url resources"]
}
