package cloud

import (
	"net/url"
	"strings"
)

type xmlOIDCProvider struct {
	ClientIDs   []string    `xml:"ClientIDList>member"`
	Thumbprints []string    `xml:"ThumbprintList>member"`
	CreateDate  string      `xml:"CreateDate"`
	URL         string      `xml:"Url"`
	Tags        []xmlIAMTag `xml:"Tags>member"`
}

// issuerKey is an issuer URL as IAM keys OIDC providers: without https:// and a
// trailing slash.
func issuerKey(u string) string {
	return strings.TrimSuffix(strings.TrimPrefix(u, "https://"), "/")
}

func (c *Cloud) createOIDCProvider(p *eparams) (any, *apiError) {
	rawURL := p.requiredStr("Url")
	clientIDs := p.members("ClientIDList")
	tags := p.iamTags()
	if p.err != nil {
		return nil, p.err
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || len(rawURL) > 255 {
		return nil, errValidation("Invalid Openid Connect Provider URL")
	}
	if len(clientIDs) > maxClientIDs {
		return nil, errLimitExceeded("Cannot exceed quota for ClientIdsPerOpenIdConnectProvider: %d", maxClientIDs)
	}
	for _, id := range clientIDs {
		if id == "" || len(id) > 255 {
			return nil, errValidation("1 validation error detected: Value '%s' at 'clientIDList' failed to satisfy constraint: Member must have length between 1 and 255", id)
		}
	}
	thumbs, aerr := p.thumbprints()
	if aerr != nil {
		return nil, aerr
	}
	key := issuerKey(rawURL)
	arn := c.iamARN("oidc-provider/" + key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oidcProviders[arn] != nil {
		return nil, errEntityExists("Provider with url %s already exists.", rawURL)
	}
	if len(c.oidcProviders) >= maxOIDCProviders {
		return nil, errLimitExceeded("Cannot exceed quota for OpenIdConnectProvidersPerAccount: %d", maxOIDCProviders)
	}
	o := &OIDCProvider{ARN: arn, URL: key, ClientIDs: clientIDs, Thumbprints: thumbs, CreateDate: c.now().UTC(), Tags: tags}
	if aerr := c.persist(put(bucketOIDCProviders, arn, o)); aerr != nil {
		return nil, aerr
	}
	c.oidcProviders[arn] = o
	return &struct {
		ARN  string      `xml:"OpenIDConnectProviderArn"`
		Tags []xmlIAMTag `xml:"Tags>member"`
	}{arn, iamXMLTags(tags)}, nil
}

// thumbprints reads ThumbprintList: at most five SHA-1 fingerprints, kept in lower case.
func (p *eparams) thumbprints() ([]string, *apiError) {
	thumbs := p.members("ThumbprintList")
	if len(thumbs) > maxThumbprints {
		return nil, errLimitExceeded("Cannot exceed quota for ThumbprintsPerOpenIdConnectProvider: %d", maxThumbprints)
	}
	for i, t := range thumbs {
		if len(t) != 40 || strings.Trim(strings.ToLower(t), "0123456789abcdef") != "" {
			return nil, errValidation("1 validation error detected: Value '%s' at 'thumbprintList' failed to satisfy constraint: Member must have length greater than or equal to 40", t)
		}
		thumbs[i] = strings.ToLower(t)
	}
	return thumbs, nil
}

func (c *Cloud) updateOIDCThumbprints(p *eparams) (any, *apiError) {
	thumbs, aerr := p.thumbprints()
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o, aerr := c.oidcProviderLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	n := *o
	n.Thumbprints = thumbs
	if aerr := c.persist(put(bucketOIDCProviders, n.ARN, &n)); aerr != nil {
		return nil, aerr
	}
	c.oidcProviders[n.ARN] = &n
	return nil, nil
}

// oidcProviderArg reads OpenIDConnectProviderArn and finds the provider.
func (c *Cloud) oidcProviderLocked(p *eparams) (*OIDCProvider, *apiError) {
	arn := p.requiredStr("OpenIDConnectProviderArn")
	if p.err != nil {
		return nil, p.err
	}
	if !strings.HasPrefix(arn, "arn:aws:iam::") || !strings.Contains(arn, ":oidc-provider/") {
		return nil, errValidation("Invalid ARN %s", arn)
	}
	o := c.oidcProviders[arn]
	if o == nil {
		return nil, errNoSuchEntity("OpenIDConnect Provider not found for arn %s", arn)
	}
	return o, nil
}

func (c *Cloud) getOIDCProvider(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, aerr := c.oidcProviderLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	return &xmlOIDCProvider{ClientIDs: o.ClientIDs, Thumbprints: o.Thumbprints, CreateDate: ts(o.CreateDate), URL: o.URL, Tags: iamXMLTags(o.Tags)}, nil
}

func (c *Cloud) listOIDCProviders(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	type entry struct {
		ARN string `xml:"Arn"`
	}
	out := struct {
		List []entry `xml:"OpenIDConnectProviderList>member"`
	}{List: []entry{}}
	for _, arn := range sortedKeys(c.oidcProviders) {
		out.List = append(out.List, entry{arn})
	}
	return &out, nil
}

func (c *Cloud) deleteOIDCProvider(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, aerr := c.oidcProviderLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := c.persist(del(bucketOIDCProviders, o.ARN)); aerr != nil {
		return nil, aerr
	}
	delete(c.oidcProviders, o.ARN)
	return nil, nil
}
