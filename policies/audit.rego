# Optional audit entrypoint: data.toolgate.audit.mask.
#
# JSON pointers into the request document whose values the audit log stores
# as "**masked**": the file contents that writes and edits carry, the
# headers and body of a fetch (tokens, form data) and what is typed into a
# process. The request digest is still computed over the unmasked document.
package toolgate.audit

mask contains "/args/content" if input.tool.name == "write-file"

mask contains "/args/old_string" if input.tool.name == "edit-file"

mask contains "/args/new_string" if input.tool.name == "edit-file"

mask contains "/args/headers" if input.tool.name == "fetch"

mask contains "/args/body" if input.tool.name == "fetch"

mask contains "/args/input" if input.tool.name == "process-input"
