// One body/query validation path for the whole service, shared with the agent.
export { jsonBody, queryOf } from '../../../shared/http-body.js';
