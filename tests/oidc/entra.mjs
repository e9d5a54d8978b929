// Microsoft Entra ID as AKS users meet it, for kubetray's tests: the real npm oidc-provider
// dressed as Entra from Microsoft's documentation (learn.microsoft.com/entra/identity-platform:
// v2.0 endpoints, access tokens, refresh tokens, device code, error codes, client credentials,
// workload identity federation) and what MSAL for Python sends (/work/notes/aks-gke.md §B, §C.2).
//
// HTTPS with a test CA (MSAL refuses http), the tenant in the path:
//   /<tid>/v2.0/.well-known/openid-configuration  issuer https://HOST/<tid>/v2.0
//   /<tid>/oauth2/v2.0/{authorize,token,devicecode,logout}, /<tid>/discovery/v2.0/keys
//   /<tid>/.well-known/openid-configuration        v1 metadata: issuer https://sts.windows.net/<tid>/
//     (what AKS's token check, guard, reads), /<tid>/discovery/keys
//   /common/userrealm/<user>                        MSAL's realm discovery before a password grant
// Any other tenant: 400 AADSTS90002, as Entra answers a tenant that does not exist.
//
// Tokens: a scope SERVER/.default gives a JWT access token with aud SERVER and Entra's v1 claims
// (iss https://sts.windows.net/<tid>/, ver 1.0, tid, oid, upn, appid, scp; app tokens idtyp app);
// id_tokens are v2 (preferred_username, tid, oid). Token responses carry client_info, refresh
// tokens rotate on every use and serve any configured resource. The device answer has Entra's
// `message` and `interval` and no verification_uri_complete. Errors have Entra's shape
// (AADSTS code in error_description, error_codes, trace_id, correlation_id, timestamp, suberror).
//
// One JSON argument:
//   {"tenant": GUID, "domain": "contoso.test", "cert": PEM path, "key": PEM path,
//    "host": "127.0.0.1", "port": 0, "resources": [server ids], "deviceInterval": 1,
//    "ttl": {...}, "clients": [...more clients], "federated": {"issuer", "subject", "jwks"}
//    (workload identity federation: the issuer and subject Entra trusts, the issuer's keys),
//    "certificateJwks": {keys} (a service principal that signs its assertions with that key),
//    "msiSecret": S (GET /msi/token answers as App Service's managed identity endpoint)}
// Prints {"authority": "https://HOST:PORT/<tid>", "issuer": ..., "host": ...} when ready.
//
// Test controls (GET): /test/counts (token requests by grant type, errors by code),
// /test/seen (every request to the Entra endpoints: method, path, parameters),
// /test/challenge?user=U&claims=JSON (the user's refreshes fail with AADSTS50076, interaction
// required with that claims challenge, until a login that sends claims=), /test/revoke?user=U
// (the user's grants are revoked: AADSTS50173), /test/clock?offset=S (the server's clock).
import { createHash, generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { SignJWT, createLocalJWKSet, jwtVerify } from 'jose';
import Provider, { errors } from 'oidc-provider';

const settings = JSON.parse(process.argv[2] || '{}');
const TENANT = settings.tenant || '72f988bf-86f1-41af-91ab-2d7cd011db47';
const DOMAIN = settings.domain || 'contoso.test';
const AKS_SERVER = '6dae42f8-4368-4678-94ff-3960e28e3630';
const AKS_CLIENT = '80faf920-1908-4b52-b5ef-a8e7bedfc67a';
const AZURE_CLI = '04b07795-8ddb-461a-bbee-02f9e1bf7b46';
const RESOURCES = settings.resources || [AKS_SERVER];
const V1_ISSUER = `https://sts.windows.net/${TENANT}/`;

let clockOffset = Number(settings.clockOffset || 0);
const realNow = Date.now.bind(Date);
Date.now = () => realNow() + clockOffset * 1000;
const ttl = { AccessToken: 3600, IdToken: 3600, RefreshToken: 86400, DeviceCode: 600,
  Grant: 86400, Session: 86400, Interaction: 600, ClientCredentials: 3600, ...(settings.ttl || {}) };

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'entra-standin', use: 'sig', alg: 'RS256' };

// A stable object id per name, shaped as Entra's GUIDs.
const guid = (text) => {
  const h = createHash('sha256').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
};
const upnOf = (login) => (login.includes('@') ? login : `${login}@${DOMAIN}`);
const b64url = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url');
const payloadOf = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());

// Public clients as Entra registers "Mobile and desktop applications": http://localhost with
// any port (oidc-provider ignores the port of loopback redirects for native clients).
const publicClient = (id) => ({
  client_id: id,
  application_type: 'native',
  token_endpoint_auth_method: 'none',
  redirect_uris: ['http://localhost', 'http://localhost/', 'http://127.0.0.1/'],
  grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code', 'password'],
  response_types: ['code'],
});
// Service principals: a secret, a certificate (private_key_jwt, as MSAL signs it: PS256 with
// x5t#S256, or RS256 with x5t), and one trusted for workload identity federation.
const SP_SECRET = { client_id: 'a1b2c3d4-0000-4000-8000-00000000c11e', client_secret: 'sp-secret-value' };
const SP_WI = { client_id: 'a1b2c3d4-0000-4000-8000-0000000000f1', client_secret: randomUUID() };
const confidential = (id, extra) => ({
  client_id: id, grant_types: ['client_credentials'], response_types: [], redirect_uris: [], ...extra,
});
const clients = [
  publicClient(AKS_CLIENT), publicClient(AZURE_CLI),
  confidential(SP_SECRET.client_id, { client_secret: SP_SECRET.client_secret, token_endpoint_auth_method: 'client_secret_post' }),
  confidential(SP_WI.client_id, { client_secret: SP_WI.client_secret, token_endpoint_auth_method: 'client_secret_post' }),
  ...(settings.certificateJwks ? [confidential(settings.certificateClientId || 'a1b2c3d4-0000-4000-8000-0000000ce27e', {
    token_endpoint_auth_method: 'private_key_jwt', jwks: settings.certificateJwks,
  })] : []),
  ...(settings.clients || []),
];

const resourceId = (server) => `urn:entra-standin:${encodeURIComponent(server)}`;
const serverOf = (resource) => decodeURIComponent(resource.replace('urn:entra-standin:', ''));
function defaultResource(ctx) {
  const scopes = String(ctx.oidc.params.scope || '').split(' ');
  const wanted = scopes.filter((s) => s.endsWith('/.default')).map((s) => s.slice(0, -'/.default'.length));
  return wanted.length ? resourceId(wanted[0]) : undefined;
}

const accounts = new Map();  // login -> claims, for the client_info and the access tokens
function accountClaims(login) {
  const oid = guid(`oid:${login}`);
  return { oid, tid: TENANT, upn: upnOf(login), name: login.split('@')[0], preferred_username: upnOf(login) };
}

const server = https.createServer({ cert: readFileSync(settings.cert), key: readFileSync(settings.key) });
await new Promise((resolve) => server.listen(settings.port || 0, settings.host || '127.0.0.1', resolve));
const port = server.address().port;
const HOST = `${settings.host || '127.0.0.1'}${port === 443 ? '' : `:${port}`}`;
const BASE = `https://${HOST}`;
const ISSUER = `${BASE}/${TENANT}/v2.0`;

const provider = new Provider(ISSUER, {
  clients,
  jwks: { keys: [jwk] },
  pkce: { required: (ctx, client) => client.clientAuthMethod === 'none' },
  routes: {
    authorization: '/oauth2/v2.0/authorize',
    token: '/oauth2/v2.0/token',
    device_authorization: '/oauth2/v2.0/devicecode',
    code_verification: '/oauth2/deviceauth',
    jwks: '/discovery/v2.0/keys',
    end_session: '/oauth2/v2.0/logout',
    userinfo: '/oidc/userinfo',
    revocation: '/oauth2/v2.0/revoke',
    introspection: '/oauth2/v2.0/introspect',
  },
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resource) => {
        const audience = serverOf(resource);
        if (!RESOURCES.includes(audience)) throw new errors.InvalidTarget(`resource ${audience} not found`);
        return { scope: `${audience}/.default`, audience, accessTokenFormat: 'jwt',
          accessTokenTTL: ttl.AccessToken, jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
  formats: {
    customizers: {
      // Entra's v1 access token (what the AKS server app's manifest asks for): the v1 issuer,
      // the server id as audience, the user's upn and oid; app tokens name the service principal.
      async jwt(ctx, token, jwt) {
        const p = jwt.payload;
        const login = token.accountId;
        const common = { aud: p.aud, iss: V1_ISSUER, iat: p.iat, nbf: p.iat, exp: p.exp, tid: TENANT,
          appid: p.client_id, uti: p.jti, ver: '1.0', rh: '0.stand-in.' };
        if (login) {
          const who = accountClaims(login);
          jwt.payload = { ...common, acr: '1', amr: ['pwd'], appidacr: '0', name: who.name, oid: who.oid,
            scp: 'user.read', sub: guid(`sub:${login}:${p.client_id}`), unique_name: who.upn, upn: who.upn,
            idp: V1_ISSUER };
        } else {
          const oid = guid(`sp:${p.client_id}`);
          jwt.payload = { ...common, appidacr: ctx.oidc.client.clientAuthMethod === 'private_key_jwt' ? '2' : '1',
            idp: V1_ISSUER, idtyp: 'app', oid, sub: oid, roles: [] };
        }
        jwt.header = { typ: 'JWT', x5t: 'entra-standin' };
      },
    },
  },
  ttl,
  clockTolerance: 0,
  conformIdTokenClaims: false,
  scopes: ['openid', 'offline_access', 'profile', 'email'],
  claims: { openid: ['sub', 'tid', 'oid', 'ver'], profile: ['name', 'preferred_username'], email: ['email'] },
  cookies: { keys: ['entra-standin-cookie-key'] },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        const who = accountClaims(id);
        accounts.set(id, who);
        return { sub: guid(`sub:${id}`), tid: who.tid, oid: who.oid, ver: '2.0', name: who.name,
          preferred_username: who.preferred_username };
      },
    };
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  async loadExistingGrant(ctx) {
    const { client, session } = ctx.oidc;
    const grantId = ctx.oidc.result?.consent?.grantId || session.grantIdFor(client.clientId);
    if (grantId) {
      const existing = await ctx.oidc.provider.Grant.find(grantId);
      if (existing) return existing;
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
    grant.addOIDCScope('openid offline_access profile email');
    for (const r of RESOURCES) grant.addResourceScope(resourceId(r), `${r}/.default`);
    await grant.save();
    return grant;
  },
});
provider.proxy = true;

// Entra's error bodies. Microsoft: classify by error, suberror and claims, never by the text.
const AADSTS = {
  invalid_tenant: [90002, (p) => `Tenant '${p}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.`],
  interaction_required: [50076, (p) => `Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '${p}'.`],
  revoked: [50173, () => 'The provided grant has expired due to it being revoked, a fresh auth token is needed. The user might have changed or reset their password.'],
  expired: [700082, () => 'The refresh token has expired due to inactivity. The token was issued on a date and was inactive for 90.00:00:00.'],
  invalid_client: [7000215, () => 'Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app.'],
  invalid_assertion: [700027, () => 'Client assertion failed signature validation.'],
  invalid_resource: [500011, (p) => `The resource principal named ${p} was not found in the tenant named ${TENANT}. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant.`],
  unauthorized_client: [700016, (p) => `Application with identifier '${p}' was not found in the directory '${TENANT}'.`],
  authorization_pending: [70016, () => 'OAuth 2.0 device flow error. Authorization is pending. Continue polling.'],
  expired_token: [70020, () => 'The provided value for the input parameter \'device_code\' is not valid. This device code has expired.'],
  wrong_password: [50126, () => 'Error validating credentials due to invalid username or password.'],
};
function entraError(error, kind, detail, extra = {}) {
  const [code, text] = AADSTS[kind] || [9002313, () => 'Invalid request. Request is malformed or invalid.'];
  const trace = randomUUID();
  const correlation = randomUUID();
  const timestamp = new Date(Date.now()).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  return {
    error,
    error_description: `AADSTS${code}: ${text(detail)} Trace ID: ${trace} Correlation ID: ${correlation} Timestamp: ${timestamp}`,
    error_codes: [code], timestamp, trace_id: trace, correlation_id: correlation,
    error_uri: `${BASE}/error?code=${code}`, ...extra,
  };
}

const counts = {};
const count = (key) => { counts[key] = (counts[key] || 0) + 1; };
const seen = [];
const challenges = new Map();  // login -> claims JSON the next login must carry
const revoked = new Set();
const pendingClaims = new Map();  // client_id -> claims of its latest authorize/devicecode request

provider.on('grant.success', (ctx) => {
  count(ctx.oidc.params.grant_type);
  const login = ctx.oidc.entities.Account?.accountId;
  if (login && ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'].includes(ctx.oidc.params.grant_type)) {
    const wanted = challenges.get(login);
    if (wanted && pendingClaims.get(ctx.oidc.client.clientId) === wanted) challenges.delete(login);
    revoked.delete(login);
  }
});
let lastDetail = '';
provider.on('grant.error', (ctx, err) => {
  count(`error:${err.error}`);
  lastDetail = [err.error_detail, err.cause?.message].filter(Boolean).join(': ');
});
provider.on('server_error', (ctx, err) => { console.error('server_error', err); });

// After oidc-provider answers: Entra's additions and its error shape.
provider.use(async (ctx, next) => {
  await next();
  const body = ctx.body && typeof ctx.body === 'object' && !Buffer.isBuffer(ctx.body) ? ctx.body : null;
  if (!body) return;
  if (ctx.oidc?.route === 'device_authorization' && body.user_code) {
    delete body.verification_uri_complete;
    body.interval = settings.deviceInterval ?? 5;
    body.message = `To sign in, use a web browser to open the page ${body.verification_uri} and enter the code ${body.user_code} to authenticate.`;
  }
  if (ctx.oidc?.route === 'token' && body.access_token) {
    body.ext_expires_in = body.expires_in;
    const claims = payloadOf(body.access_token);
    if (claims.upn && ctx.get('x-standin-client-info') === '1') {
      body.client_info = b64url({ uid: claims.oid, utid: claims.tid });
    }
  }
  if (body.error && ['token', 'device_authorization'].includes(ctx.oidc?.route)) {
    const grant = ctx.oidc.params?.grant_type;
    let kind = body.error;
    let detail = ctx.oidc.params?.client_id;
    if (body.error === 'invalid_grant' && grant === 'refresh_token') kind = 'expired';
    if (body.error === 'invalid_grant' && grant === 'password') kind = 'wrong_password';
    if (body.error === 'invalid_client' && ctx.oidc.params?.client_assertion) kind = 'invalid_assertion';
    if (body.error === 'invalid_target') { kind = 'invalid_resource'; detail = String(ctx.oidc.params?.scope || ''); }
    ctx.body = entraError(body.error === 'invalid_target' ? 'invalid_resource' : body.error, kind, detail,
      { standin_detail: `${body.error_description} ${lastDetail}` });  // what oidc-provider said, for test failures
  }
});

// The resource owner password grant (deprecated by Microsoft; MSAL still does it): the password
// of user U is "pw-U".
provider.registerGrantType('password', async (ctx) => {
  const { client, params } = ctx.oidc;
  const login = String(params.username).split('@')[0];
  if (params.password !== `pw-${login}`) throw new errors.InvalidGrant('wrong username or password');
  const grant = new provider.Grant({ clientId: client.clientId, accountId: login });
  grant.addOIDCScope('openid offline_access profile');
  for (const r of RESOURCES) grant.addResourceScope(resourceId(r), `${r}/.default`);
  await grant.save();
  const resource = defaultResource(ctx);
  const scope = 'openid offline_access profile';
  const server = serverOf(resource);
  const at = new provider.AccessToken({ accountId: login, client, grantId: grant.jti, scope: `${server}/.default`, gty: 'password' });
  at.resourceServer = new provider.ResourceServer(resource, { scope: `${server}/.default`, audience: server,
    accessTokenFormat: 'jwt', accessTokenTTL: ttl.AccessToken, jwt: { sign: { alg: 'RS256' } } });
  const accessToken = await at.save();
  const rt = new provider.RefreshToken({ accountId: login, client, grantId: grant.jti, scope: `${scope} ${server}/.default`, gty: 'password', resource });
  const refreshToken = await rt.save();
  const who = accountClaims(login);
  const token = new provider.IdToken({ sub: guid(`sub:${login}`), tid: TENANT, oid: who.oid, ver: '2.0',
    name: who.name, preferred_username: who.preferred_username }, { ctx, client });
  token.scope = scope;
  const idToken = await token.issue({ use: 'idtoken' });
  ctx.body = { token_type: 'Bearer', scope: `${server}/.default ${scope}`,
    expires_in: at.expiration, access_token: accessToken, refresh_token: refreshToken,
    id_token: idToken, client_info: b64url({ uid: who.oid, utid: TENANT }) };
}, new Set(['username', 'password', 'scope', 'client_info']));

const callback = provider.callback();
const json = (res, status, doc) => {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(doc));
};
async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
}
const federatedKeys = settings.federated ? createLocalJWKSet(settings.federated.jwks) : null;

// What MSAL sends that oidc-provider would refuse, or what Entra decides before tokens.
// Returns the (possibly rewritten) form, or null when the answer has been sent.
async function beforeToken(params, res) {
  const grant = params.get('grant_type');
  if (grant === 'refresh_token') {
    // MSAL re-sends offline_access on every refresh; Entra takes it, oidc-provider grants it
    // only with prompt=consent and would answer invalid_scope.
    params.set('scope', String(params.get('scope') || '').split(' ').filter((s) => s !== 'offline_access').join(' '));
    const rt = await provider.RefreshToken.find(params.get('refresh_token') || '');
    const login = rt?.accountId;
    if (login && revoked.has(login)) {
      count('error:invalid_grant');
      json(res, 400, entraError('invalid_grant', 'revoked'));
      return null;
    }
    if (login && challenges.has(login)) {
      count('error:interaction_required');
      const server = String(params.get('scope') || '').split(' ').find((s) => s.endsWith('/.default'));
      json(res, 400, entraError('invalid_grant', 'interaction_required', server?.slice(0, -9),
        { suberror: 'basic_action', claims: challenges.get(login) }));
      return null;
    }
  }
  if (grant === 'password' && challenges.has(String(params.get('username')).split('@')[0])) {
    count('error:interaction_required');
    json(res, 400, entraError('invalid_grant', 'interaction_required', AKS_SERVER,
      { suberror: 'basic_action', claims: challenges.get(String(params.get('username')).split('@')[0]) }));
    return null;
  }
  const assertion = params.get('client_assertion');
  if (assertion && federatedKeys) {
    const claims = payloadOf(assertion);
    if (claims.iss === settings.federated.issuer) {
      // Workload identity federation: Entra trusts this issuer and subject for the app, with
      // audience api://AzureADTokenExchange, and checks the token's signature and times.
      try {
        await jwtVerify(assertion, federatedKeys, { issuer: settings.federated.issuer,
          audience: 'api://AzureADTokenExchange', subject: settings.federated.subject, clockTolerance: 0,
          currentDate: new Date(Date.now()) });
      } catch (e) {
        count('error:invalid_client');
        json(res, 401, entraError('invalid_client', 'invalid_assertion', `${e.code}: ${e.message}`));
        return null;
      }
      if (params.get('client_id') !== SP_WI.client_id) {
        json(res, 400, entraError('unauthorized_client', 'unauthorized_client', params.get('client_id')));
        return null;
      }
      params.delete('client_assertion');
      params.delete('client_assertion_type');
      params.set('client_secret', SP_WI.client_secret);
    }
  }
  return params;
}

server.on('request', async (req, res) => {
  const url = new URL(req.url, BASE);
  res.setHeader('date', new Date(Date.now()).toUTCString());
  if (url.pathname.startsWith('/test/')) {
    const q = url.searchParams;
    if (url.pathname === '/test/counts') return json(res, 200, counts);
    if (url.pathname === '/test/seen') return json(res, 200, seen);
    if (url.pathname === '/test/challenge') {
      challenges.set(q.get('user'), q.get('claims') || '{"access_token":{"capolids":{"essential":true,"values":["mfa"]}}}');
      return json(res, 200, {});
    }
    if (url.pathname === '/test/revoke') { revoked.add(q.get('user')); return json(res, 200, {}); }
    if (url.pathname === '/test/clock') {
      if (q.get('offset') !== null) clockOffset = Number(q.get('offset'));
      return json(res, 200, { offset: clockOffset });
    }
    return json(res, 404, {});
  }
  if (url.pathname === '/msi/token') {
    // A managed identity endpoint as Azure App Service serves it (api-version 2019-08-01):
    // the platform's secret in X-IDENTITY-HEADER, the resource asked for, a user-assigned
    // identity by client_id or mi_res_id. IMDS (169.254.169.254) speaks the same JSON.
    const q = url.searchParams;
    seen.push({ method: req.method, path: url.pathname, params: Object.fromEntries(q), headers: req.headers });
    if (req.headers['x-identity-header'] !== settings.msiSecret) return json(res, 401, { error: 'unauthorized' });
    const server = q.get('resource');
    if (!RESOURCES.includes(server)) return json(res, 400, entraError('invalid_resource', 'invalid_resource', server));
    const clientId = q.get('client_id') || (q.get('mi_res_id') ? guid(`mi:${q.get('mi_res_id')}`) : guid('mi:system'));
    const now = Math.floor(Date.now() / 1000);
    const oid = guid(`sp:${clientId}`);
    const token = await new SignJWT({ aud: server, iss: V1_ISSUER, iat: now, nbf: now, exp: now + ttl.AccessToken,
      appid: clientId, appidacr: '2', idp: V1_ISSUER, idtyp: 'app', oid, sub: oid, tid: TENANT, ver: '1.0' })
      .setProtectedHeader({ alg: 'RS256', kid: jwk.kid, typ: 'JWT' }).sign(privateKey);
    count('managed_identity');
    return json(res, 200, { access_token: token, expires_on: String(now + ttl.AccessToken), resource: server,
      token_type: 'Bearer', client_id: clientId });
  }
  const [, first, ...rest] = url.pathname.split('/');
  if (first === 'common' && rest[0] === 'userrealm') {
    const user = decodeURIComponent(rest[1] || '');
    seen.push({ method: req.method, path: url.pathname, params: {} });
    if (!user.endsWith(`@${DOMAIN}`)) return json(res, 404, {});
    return json(res, 200, { ver: '1.0', account_type: 'Managed', domain_name: DOMAIN,
      cloud_instance_name: 'microsoftonline.com', cloud_audience_urn: 'urn:federation:MicrosoftOnline' });
  }
  if (first !== TENANT && first !== DOMAIN) {
    return json(res, 400, entraError('invalid_request', 'invalid_tenant', first));
  }
  let rel = `/${rest.join('/')}`;
  if (rel === '/.well-known/openid-configuration') {  // v1 metadata, what guard reads
    return json(res, 200, { issuer: V1_ISSUER, token_endpoint: `${BASE}/${TENANT}/oauth2/token`,
      authorization_endpoint: `${BASE}/${TENANT}/oauth2/authorize`, jwks_uri: `${BASE}/${TENANT}/discovery/keys`,
      id_token_signing_alg_values_supported: ['RS256'], response_types_supported: ['code', 'id_token', 'code id_token', 'token id_token', 'token'],
      subject_types_supported: ['pairwise'], tenant_region_scope: 'EU', cloud_instance_name: 'microsoftonline.com' });
  }
  if (rel === '/v2.0/.well-known/openid-configuration') rel = '/.well-known/openid-configuration';
  if (rel === '/discovery/keys') rel = '/discovery/v2.0/keys';
  const params = req.method === 'POST' ? new URLSearchParams(await readBody(req)) : url.searchParams;
  if (['/oauth2/v2.0/token', '/oauth2/v2.0/devicecode', '/oauth2/v2.0/authorize'].includes(rel)) {
    const shown = Object.fromEntries([...params].filter(([k]) => !['client_secret', 'password', 'code_verifier'].includes(k)));
    seen.push({ method: req.method, path: url.pathname, params: shown, headers: req.headers });
    if (params.get('claims')) pendingClaims.set(params.get('client_id'), params.get('claims'));
    else if (rel !== '/oauth2/v2.0/token') pendingClaims.delete(params.get('client_id'));
  }
  let form = params;
  if (rel === '/oauth2/v2.0/authorize' && params.get('prompt') === 'select_account') {
    // Entra's account picker; oidc-provider knows no such prompt: a fresh login stands in.
    params.set('prompt', 'login');
    url.search = params.toString();
  }
  if (rel === '/oauth2/v2.0/token') {
    form = await beforeToken(params, res);
    if (!form) return;
  }
  if (req.method === 'POST') req.body = form.toString();
  // oidc-provider keeps only the parameters it knows: MSAL's client_info=1 rides in a header.
  req.headers['x-standin-client-info'] = params.get('client_info') || '';
  req.originalUrl = url.pathname.replace(/^\/[^/]+/, `/${TENANT}`) + url.search;
  req.url = rel + url.search;
  if (url.pathname.endsWith('/v2.0/.well-known/openid-configuration')) {
    req.originalUrl = `/${TENANT}/.well-known/openid-configuration`;
  }
  callback(req, res);
});

process.stdout.write(`${JSON.stringify({ authority: `${BASE}/${TENANT}`, issuer: ISSUER, host: HOST,
  tenant: TENANT, domain: DOMAIN, v1_issuer: V1_ISSUER, aks_server: AKS_SERVER, aks_client: AKS_CLIENT,
  sp_secret: SP_SECRET, sp_workload: SP_WI.client_id })}\n`);
