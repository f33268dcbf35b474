package toolgate.audit_test

import data.toolgate.audit
import data.toolgate.fixtures_test.request
import data.toolgate.fixtures_test.write

test_mask[note] if {
	some note, c in {
		"write-file masks the content": {"tool": "write-file", "want": {"/args/content"}},
		"edit-file masks both strings": {"tool": "edit-file", "want": {"/args/old_string", "/args/new_string"}},
		"read-file masks nothing": {"tool": "read-file", "want": set()},
		"fetch masks headers and body": {"tool": "fetch", "want": {"/args/headers", "/args/body"}},
		"process-input masks what is typed": {"tool": "process-input", "want": {"/args/input"}},
		"bash masks nothing": {"tool": "bash", "want": set()},
	}
	audit.mask == c.want with input as request("acme", ["developer"], c.tool, [write("src/a.go")])
}
