# Availability entrypoint: data.toolgate.availability.allow.
#
# Input: {"tenant", "principal", "client", "session_id", "tool"}; there are no
# arguments and no resources yet. A tool is offered when one of the caller's
# roles in its tenant lists it (or lists "*"). Unknown tenants and roles are
# offered nothing. For a tool whose argument takes one of a set of values
# (the skill tool's skills), each value is asked about with input.choice
# ({"type": "skill", "name", "version", "description"}); the values offered
# become the enum of the schema the caller is shown and held to.
package toolgate.availability

import data.toolgate.lib

default allow := false

allow if {
	lib.tool_offered
	lib.choice_offered
}
