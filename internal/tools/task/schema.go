package task

import (
	"strconv"
	"strings"
)

// The schemas carry every size and count limit, so that the gateway's
// validator refuses an oversize argument before any tool code runs. They are
// built from the Options, so the published limit is the enforced one.

// schemaFor fills the limit placeholders of a schema template.
func schemaFor(tmpl string, o Options) string {
	return strings.NewReplacer(
		"{MAX_SUBJECT}", strconv.Itoa(o.MaxSubject),
		"{MAX_DESCRIPTION}", strconv.Itoa(o.MaxDescription),
		"{MAX_DEPS}", strconv.Itoa(o.MaxDependencies),
		"{ID_PATTERN}", idPattern,
		"{ID_LEN}", strconv.Itoa(idLen),
		"{MAX_OWNER}", strconv.Itoa(maxOwner),
	).Replace(tmpl)
}

const createSchemaTmpl = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "subject": {
      "type": "string", "minLength": 1, "maxLength": {MAX_SUBJECT},
      "description": "Short imperative title of the task, e.g. \"Run the unit tests\"."
    },
    "description": {
      "type": "string", "maxLength": {MAX_DESCRIPTION}, "default": "",
      "description": "What has to be done and how to tell that it is done. Default empty."
    },
    "blocked_by": {
      "type": "array", "maxItems": {MAX_DEPS}, "uniqueItems": true, "default": [],
      "items": {"type": "string", "minLength": {ID_LEN}, "maxLength": {ID_LEN}, "pattern": "{ID_PATTERN}"},
      "description": "Ids of your tasks of this session that must be completed before this one. Default none."
    }
  },
  "required": ["subject"],
  "additionalProperties": false
}`

const updateSchemaTmpl = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "task_id": {
      "type": "string", "minLength": {ID_LEN}, "maxLength": {ID_LEN}, "pattern": "{ID_PATTERN}",
      "description": "Id of the task to change, as returned by task-create or task-list."
    },
    "subject": {
      "type": "string", "minLength": 1, "maxLength": {MAX_SUBJECT},
      "description": "New title."
    },
    "description": {
      "type": "string", "maxLength": {MAX_DESCRIPTION},
      "description": "New description; replaces the old one."
    },
    "status": {
      "type": "string", "enum": ["pending", "in_progress", "completed"], "maxLength": 11,
      "description": "New status: pending, in_progress or completed."
    },
    "add_blocked_by": {
      "type": "array", "maxItems": {MAX_DEPS}, "uniqueItems": true,
      "items": {"type": "string", "minLength": {ID_LEN}, "maxLength": {ID_LEN}, "pattern": "{ID_PATTERN}"},
      "description": "Ids of tasks of this session, of the task's owner, that must now be completed before this one."
    },
    "remove_blocked_by": {
      "type": "array", "maxItems": {MAX_DEPS}, "uniqueItems": true,
      "items": {"type": "string", "minLength": {ID_LEN}, "maxLength": {ID_LEN}, "pattern": "{ID_PATTERN}"},
      "description": "Ids to drop from the tasks this one waits for."
    }
  },
  "required": ["task_id"],
  "additionalProperties": false
}`

const getSchemaTmpl = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "task_id": {
      "type": "string", "minLength": {ID_LEN}, "maxLength": {ID_LEN}, "pattern": "{ID_PATTERN}",
      "description": "Id of the task to read."
    }
  },
  "required": ["task_id"],
  "additionalProperties": false
}`

const listSchemaTmpl = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "status": {
      "type": "string", "enum": ["pending", "in_progress", "completed"], "maxLength": 11,
      "description": "List only tasks with this status. Default: all tasks."
    },
    "owner": {
      "type": "string", "minLength": 1, "maxLength": {MAX_OWNER},
      "description": "List the tasks of this principal, or \"*\" for every principal of the session, where policy allows it. Default: your own tasks."
    }
  },
  "additionalProperties": false
}`
