package task

import (
	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/tools"
)

// maxOutput is each tool's own cap on model-facing content.
const maxOutput = 64 << 10

// timeLayout is RFC 3339 in UTC with milliseconds, the stored precision.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// view is a task as the model sees it. Owner and version stay internal.
type view struct {
	ID          string   `json:"id"`
	Subject     string   `json:"subject"`
	Description *string  `json:"description,omitzero"` // nil only when left out to fit the output cap
	Status      string   `json:"status"`
	BlockedBy   []string `json:"blocked_by"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	Truncated   bool     `json:"truncated,omitzero"` // the description was left out
}

func viewOf(t Task, withDescription bool) view {
	v := view{
		ID: t.ID, Subject: t.Subject, Status: t.Status, BlockedBy: t.BlockedBy,
		CreatedAt: t.Created.UTC().Format(timeLayout), UpdatedAt: t.Updated.UTC().Format(timeLayout),
	}
	if v.BlockedBy == nil {
		v.BlockedBy = []string{}
	}
	if withDescription {
		d := t.Description
		v.Description = &d
	}
	return v
}

// data is v as Result.Data: plain JSON values, the same object as the text.
func (v view) data() map[string]any {
	m := map[string]any{
		"id": v.ID, "subject": v.Subject, "status": v.Status, "blocked_by": idsToArgs(v.BlockedBy),
		"created_at": v.CreatedAt, "updated_at": v.UpdatedAt,
	}
	if v.Description != nil {
		m["description"] = *v.Description
	}
	if v.Truncated {
		m["truncated"] = true
	}
	return m
}

func outputCap(lim tools.Limits) int {
	if lim.MaxOutputBytes > 0 {
		return lim.MaxOutputBytes
	}
	return maxOutput
}

// renderTask is the result of the single-task tools. A task too large for
// the output cap (a policy can tighten it) is shown without its description,
// flagged, rather than as cut, invalid JSON: the write has happened either
// way and the model must still learn the id.
func renderTask(t Task, lim tools.Limits) (tools.Result, error) {
	v := viewOf(t, true)
	full, err := json.Marshal(v)
	if err != nil {
		return tools.Result{}, err
	}
	if len(full) <= outputCap(lim) {
		return tools.Result{Content: string(full), Data: v.data(), Bytes: len(full)}, nil
	}
	short := viewOf(t, false)
	short.Truncated = true
	b, err := json.Marshal(short)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Content: string(b), Data: short.data(), Bytes: len(full), Truncated: true}, nil
}

// listTail is the room kept for the closing members of a cut list:
// `],"descriptions_omitted":true,"truncated":true,"total":NNNNNNNNNN}`.
const listTail = 72

// listView is task-list's result. The flags appear only when the list had
// to be shortened to fit the output cap.
type listView struct {
	Tasks               []view `json:"tasks"`
	DescriptionsOmitted bool   `json:"descriptions_omitted,omitzero"`
	Truncated           bool   `json:"truncated,omitzero"`
	Total               int    `json:"total,omitzero"`
}

func (l listView) data() map[string]any {
	items := make([]any, len(l.Tasks))
	for i, v := range l.Tasks {
		items[i] = v.data()
	}
	m := map[string]any{"tasks": items}
	if l.DescriptionsOmitted {
		m["descriptions_omitted"] = true
	}
	if l.Truncated {
		m["truncated"] = true
		m["total"] = float64(l.Total)
	}
	return m
}

// renderList is task-list's result, {"tasks":[...]}. When the full list does
// not fit the cap, descriptions are left out ("descriptions_omitted"); if it
// still does not fit, the list stops at the last task that fits and says so
// ("truncated", "total"). task-get shows any one task in full.
func renderList(ts []Task, lim tools.Limits) (tools.Result, error) {
	budget := outputCap(lim)
	all := listView{Tasks: make([]view, len(ts))}
	for i, t := range ts {
		all.Tasks[i] = viewOf(t, true)
	}
	full, err := json.Marshal(all)
	if err != nil {
		return tools.Result{}, err
	}
	if len(full) <= budget {
		return tools.Result{Content: string(full), Data: all.data(), Bytes: len(full)}, nil
	}

	short := listView{Tasks: make([]view, 0, len(ts)), DescriptionsOmitted: true}
	size := len(`{"tasks":[`) + listTail
	for _, t := range ts {
		v := viewOf(t, false)
		item, err := json.Marshal(v)
		if err != nil {
			return tools.Result{}, err
		}
		if size+len(item)+1 > budget {
			break
		}
		size += len(item) + 1
		short.Tasks = append(short.Tasks, v)
	}
	if len(short.Tasks) < len(ts) {
		short.Truncated, short.Total = true, len(ts)
	}
	b, err := json.Marshal(short)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Content: string(b), Data: short.data(), Bytes: len(full), Truncated: true}, nil
}
