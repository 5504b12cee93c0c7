export { default } from '../../jest.base.js';
