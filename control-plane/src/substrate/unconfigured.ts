/** Where no substrate was configured (identity-only deployments and tests): every act is refused. */
import { AppError } from '../../../shared/errors.js';
import type { Substrate } from './substrate.js';
import { ERRORS } from '../errors.js';

export const NO_SUBSTRATE: Substrate = {
  kind: 'fake',
  create: () => Promise.reject(unconfigured()),
  start: () => Promise.reject(unconfigured()),
  stop: () => Promise.reject(unconfigured()),
  status: async () => 'absent',
  liveness: async () => 'absent',
  thaw: () => Promise.reject(unconfigured()),
  reidentify: () => Promise.reject(unconfigured()),
  capture: () => Promise.reject(unconfigured()),
  replaceDisk: () => Promise.reject(unconfigured()),
  pinLayer: () => Promise.reject(unconfigured()),
  releaseLayer: () => Promise.reject(unconfigured()),
  layerPins: async () => [],
  destroy: async () => {},
  openChannel: () => Promise.reject(unconfigured()),
  issueEnrollment: () => Promise.reject(unconfigured()),
  reattach: async () => [],
  diskVolume: () => null,
  remountDiskVolume: () => Promise.reject(unconfigured()),
};

function unconfigured(): AppError {
  return ERRORS.noSubstrateConfigured();
}
