export { jsonBody, queryOf } from '../../../shared/http-body.js';
