package review

// The console's dispatch pages (package dispatch; see docs/dispatch.md):
//
//	GET /review/dispatch                          every period's runs, newest first
//	GET /review/dispatch/{partner}/{period}       one period: its runs, progress, dead letters

import (
	"net/http"
	"slices"
	"strings"

	"github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/records"
)

type dispatchView struct {
	Partner, Period string // empty on the index
	Runs            []dispatchRun
}

type dispatchRun struct {
	dispatch.RunStatus
	Percent int
}

func (s *Server) routesDispatch(mux *http.ServeMux) {
	mux.HandleFunc("GET /review/dispatch", s.authConsole(s.dispatchPage))
	mux.HandleFunc("GET /review/dispatch/{partner}/{period}", s.authConsole(s.dispatchPage))
}

func (s *Server) dispatchPage(w http.ResponseWriter, r *http.Request, sess records.Session) {
	v := dispatchView{Partner: r.PathValue("partner"), Period: strings.ToUpper(r.PathValue("period"))}
	if v.Partner != "" && !records.InScope(sess.Reviewer.Partners, v.Partner) {
		s.denied(w, r, sess.Reviewer, records.ViaConsole, 0, v.Partner)
		return
	}
	runs, err := dispatch.NewStore(s.Store.Pool()).Status(r.Context(), v.Partner, v.Period)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	for _, run := range slices.Backward(runs) {
		if !records.InScope(sess.Reviewer.Partners, run.Partner) {
			continue
		}
		pct := 100
		if run.Total > 0 {
			pct = (run.Succeeded + run.Failed) * 100 / run.Total
		}
		v.Runs = append(v.Runs, dispatchRun{RunStatus: run, Percent: pct})
	}
	if v.Partner != "" && len(v.Runs) == 0 {
		s.consoleError(w, r, http.StatusNotFound, "Period "+v.Period+" of partner "+v.Partner+" has not been dispatched.")
		return
	}
	title := "Dispatch"
	if v.Partner != "" {
		title = "Dispatch of " + v.Partner + " " + v.Period
	}
	s.render(w, r, http.StatusOK, "dispatch", page{Title: title, Reviewer: sess.Reviewer.Name, CSRF: sess.CSRFToken,
		Scope: strings.Join(sess.Reviewer.Partners, ", "), V: v})
}
