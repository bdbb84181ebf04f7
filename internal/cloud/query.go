package cloud

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
)

// The AWS Query protocol's answers, shared by the services that speak it on the
// endpoint beside EC2 (Elastic Load Balancing, IAM, STS): <ActionResponse> holding
// <ActionResult> and the request id; errors as <ErrorResponse>.

// writeQueryResult answers action name with inner as its Result element's children;
// inner nil means the action's answer has no Result element.
func writeQueryResult(w http.ResponseWriter, ns, name string, inner []byte, reqID string) {
	w.Header().Set("Content-Type", "text/xml")
	result := ""
	if inner != nil {
		result = "<" + name + "Result>" + string(inner) + "</" + name + "Result>"
	}
	fmt.Fprintf(w, `<%sResponse xmlns="%s">%s<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`,
		name, ns, result, reqID, name)
}

type queryErrorBody struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

// writeQueryError answers with the Query protocol's error form: a Sender error for a
// bad request, a Receiver error for the service's own failure.
func writeQueryError(w http.ResponseWriter, ns, reqID string, e *apiError) {
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	var body queryErrorBody
	body.Xmlns = ns
	body.Error.Type = "Sender"
	if status >= 500 {
		body.Error.Type = "Receiver"
	}
	body.Error.Code, body.Error.Message, body.RequestID = e.Code, e.Message, reqID
	out, _ := xml.Marshal(body)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	w.Write(out)
}

// marshalInner marshals v and drops its outer element (nil v gives nil).
func marshalInner(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	var b bytes.Buffer
	if err := xml.NewEncoder(&b).EncodeElement(v, xml.StartElement{Name: xml.Name{Local: "Result"}}); err != nil {
		return nil, err
	}
	return stripRoot(b.Bytes()), nil
}
