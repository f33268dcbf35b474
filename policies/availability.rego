# Availability entrypoint: data.toolgate.availability.allow.
#
# Input: {"tenant", "principal", "client", "session_id", "tool"}; there are no
# arguments and no resources yet. A tool is offered when one of the caller's
# roles in its tenant lists it (or lists "*"). Unknown tenants and roles are
# offered nothing.
package toolgate.availability

import data.toolgate.lib

default allow := false

allow if lib.tool_offered
